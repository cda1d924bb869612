"""Seeded synthetic conversations: alternating contact and agent turns of mixed sizes.

Sizes run from 80 to 20,000 characters: mostly short messages, some
paragraphs, a few pasted documents (a document is always over the
per-message budget of 1000 tokens, so the window has trimming to do). The
text is words, not one repeated letter, and is cut from one seeded corpus so
that drawing a thousand messages stays cheap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory_core.settings import load_settings
from memory_core.trim import prepared
from memory_core.turns import Turn

MAX_CHARS = 20_000
SIZE_CLASSES = ((80, 400), (400, 4_000), (4_000, 20_000))
SIZE_WEIGHTS = (5, 3, 1)
_TEXT = (
    "the order was shipped on monday and the invoice lists three items but only two "
    "arrived could you check the tracking number please we also need the contract "
    "renewal date the amount due is 240 euros before the deadline thanks again for "
    "your help with the account settings and the password reset request"
)
_WORDS = tuple(_TEXT.split())


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    """`user` (the contact) or `assistant` (the agent)."""
    text: str


def corpus(rng: random.Random, chars: int = 2 * MAX_CHARS) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def message_text(rng: random.Random, source: str) -> str:
    low, high = rng.choices(SIZE_CLASSES, weights=SIZE_WEIGHTS)[0]
    size = rng.randint(low, high)
    start = rng.randrange(0, len(source) - size)
    return source[start : start + size]


def conversation(rng: random.Random, messages: int) -> list[Message]:
    """`messages` turns, oldest first, starting with the contact and alternating."""
    source = corpus(rng)
    return [
        Message("user" if n % 2 == 0 else "assistant", message_text(rng, source))
        for n in range(messages)
    ]


def as_turns(messages: list[Message], start: datetime | None = None) -> list[Turn]:
    """The messages as the store hands them to the window: Turns a minute apart, each
    with the estimate (and a long one with the cut) made as it was recorded."""
    first = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    trim = load_settings({}).window_limits.trim
    return [
        prepared(
            Turn(
                f"m{n:05d}",
                "user" if m.role == "user" else "assistant",
                [{"text": m.text}],
                first + timedelta(minutes=n),
            ),
            trim,
        )
        for n, m in enumerate(messages)
    ]
