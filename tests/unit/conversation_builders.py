"""Small builders for conversations, shared by the domain tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

from memory_core.converse_shape import CachePoints
from memory_core.rules.model import PromptCache, PromptCacheTtl
from memory_core.settings import load_settings
from memory_core.tokens import LETTER_UNITS, tokens_to_units
from memory_core.turns import Role, Turn
from memory_core.window import Window, WindowLimits, build_window

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
# Every tenant's cache points, by its `promptCache` and `promptCacheTtl` rules.
EVERY_CACHE_POINTS = [
    CachePoints.of(policy, ttl)
    for policy in get_args(PromptCache)
    for ttl in get_args(PromptCacheTtl)
]


class Clock:
    """Hands out increasing `sentAt` values and unique ids."""

    def __init__(self, start: datetime = T0, step: timedelta = timedelta(minutes=1)) -> None:
        self.now = start
        self.step = step
        self.count = 0

    def tick(self) -> tuple[str, datetime]:
        self.count += 1
        self.now += self.step
        return f"turn-{self.count:05d}", self.now


def turn(clock: Clock, role: Role, *content: dict[str, Any]) -> Turn:
    turn_id, sent_at = clock.tick()
    return Turn(turn_id, role, list(content), sent_at)


def text(body: str) -> dict[str, Any]:
    return {"text": body}


def tool_use(tool_use_id: str, name: str = "lookup", **tool_input: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": tool_input}}


def tool_result(tool_use_id: str, body: str) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "content": [{"text": body}]}}


def input_of(input_chars: int) -> dict[str, Any]:
    """A tool input whose JSON text (what the estimate and the trim read) is `input_chars` long.

    `tool_use("c1", **input_of(4000))` is a call with a 4,000-character input.
    """
    bare = len('{"q":""}')
    if input_chars < bare:
        raise ValueError(f"an input is at least {bare} characters")
    return {"q": "x" * (input_chars - bare)}


def block_kinds(content: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """Each block's kind, in order: `text`, `toolUse`, `toolResult`, its keys, or `None`."""
    return [_block_kind(block) for block in content]


def _block_kind(block: Mapping[str, Any] | None) -> str:
    if block is None:
        return "None"
    known = [kind for kind in ("text", "toolUse", "toolResult") if kind in block]
    return known[0] if known else "/".join(block)


def chars(tokens: int, letter: str = "x") -> str:
    """A text of one ASCII letter whose estimate is exactly `tokens`.

    As many letters (13 units each) as `tokens` tokens hold: short of them by less
    than a letter, so one letter more is a token more.
    """
    if not (letter.isascii() and letter.isalpha() and len(letter) == 1):
        raise ValueError(f"{letter!r} is not one ASCII letter")
    return letter * (tokens_to_units(tokens) // LETTER_UNITS)


def alternating(clock: Clock, messages: int, tokens_each: int = 10) -> list[Turn]:
    """Question, answer, question, answer... oldest first."""
    roles: tuple[Role, Role] = ("user", "assistant")
    return [turn(clock, roles[i % 2], text(chars(tokens_each))) for i in range(messages)]


def default_limits(**overrides: str) -> WindowLimits:
    return load_settings(overrides).window_limits


def window_of(history_oldest_first: Sequence[Turn], limits: WindowLimits | None = None) -> Window:
    limits = limits or default_limits()
    return build_window(
        reversed(history_oldest_first), limits, candidate_count=len(history_oldest_first)
    )


def ids(turns: Iterable[Turn]) -> list[str]:
    return [t.id for t in turns]


class CountingReader:
    """The candidates newest first, as a store hands them, counting what the window pulls."""

    def __init__(self, oldest_first: Sequence[Turn]) -> None:
        self.pulled = 0
        self._turns = oldest_first

    def __iter__(self) -> Iterator[Turn]:
        for candidate in reversed(self._turns):
            self.pulled += 1
            yield candidate
