"""SPEC 5.5.7 at its budget: a long exchange grows message by message, its opening counted.

The message that opens the kept part (the question with the marker, or the marker
alone) is estimated with the count it will carry, so the budget's edge moves when
that count gains or loses a digit. Each example puts the opening's cost at a chosen
remainder of units over whole tokens, and the budget exactly at a window's estimate
and one token under it.
"""

from __future__ import annotations

import dataclasses

import pytest

from memory_core.tokens import UNITS_PER_TOKEN, estimate_content_tokens
from memory_core.turns import Turn
from memory_core.window import (
    NO_QUESTION_MARKER,
    WindowLimits,
    exchange_omission_marker,
)
from tests.unit.conversation_builders import (
    Clock,
    chars,
    default_limits,
    text,
    tool_result,
    tool_use,
    turn,
    window_of,
)

REPLY_TOKENS = 50
LETTER_UNITS = 13
"""A question's "q": five letters cost a token and a unit, so 64 of them reach every remainder."""
NO_QUESTION_UNITS = 2 * 15 + 50 * 13 + 12 + 16
"""`NO_QUESTION_MARKER`: two "…", 50 letters, 12 spaces, and the line break after it."""
KEPT = 5
# The floor keeps two; the cap leaves room for more than KEPT, so the budget decides.
CAP = KEPT + 3
FLOOR = 2


def _limits(max_tokens: int) -> WindowLimits:
    return dataclasses.replace(
        default_limits(), max_tokens=max_tokens, max_messages=CAP, floor_messages=FLOOR
    )


def _replies(clock: Clock, count: int) -> list[Turn]:
    return [turn(clock, "assistant", text(chars(REPLY_TOKENS, "r"))) for _ in range(count)]


def _marker_units(omitted: int) -> int:
    """`exchange_omission_marker(omitted)`: two "…" (15 units each), its digits (32 each),
    29 letters (13 each) and seven spaces (1 each)."""
    return 2 * 15 + 32 * len(str(omitted)) + 29 * LETTER_UNITS + 7


def _question_of(omitted: int, remainder: int) -> str:
    """A question of at least 40 letters whose cost with the marker for `omitted` leaves
    `remainder` units over whole tokens."""
    length = next(
        n
        for n in range(40, 40 + UNITS_PER_TOKEN)
        if (n * LETTER_UNITS + _marker_units(omitted)) % UNITS_PER_TOKEN == remainder
    )
    return "q" * length


def _opening_tokens(question: str | None, omitted: int) -> int:
    """The opening message's estimate: its question (or the no-question line) and the
    marker, rounded up once."""
    lead = NO_QUESTION_UNITS if question is None else len(question) * LETTER_UNITS
    return -(-(lead + _marker_units(omitted)) // UNITS_PER_TOKEN)


def _estimate_keeping(question: str | None, exchange: int, kept: int) -> int:
    """The window's estimate with the newest `kept` replies of an `exchange`-long exchange."""
    return _opening_tokens(question, exchange - kept) + kept * REPLY_TOKENS


def _longest_within(question: str | None, exchange: int, max_tokens: int) -> int:
    """The most replies kept, at least the floor, within the budget and the cap."""
    room = CAP - 1
    within = [
        kept
        for kept in range(FLOOR, room + 1)
        if _estimate_keeping(question, exchange, kept) <= max_tokens
    ]
    return max(within, default=FLOOR)


# Omitted counts on both sides of a digit (9 and 10), each at every remainder: one more
# or one fewer in the count (a digit is half a token) changes the opening by a token at
# some remainder.
BOUNDARIES = [(omitted, remainder) for omitted in (9, 10) for remainder in range(UNITS_PER_TOKEN)]


@pytest.mark.parametrize(("omitted", "remainder"), BOUNDARIES)
@pytest.mark.parametrize("under", [0, 1], ids=["exactly at the budget", "one token under"])
def test_a_long_exchange_keeps_the_most_replies_whose_estimate_with_its_opening_fits(
    omitted: int, remainder: int, under: int
) -> None:
    clock = Clock()
    question = _question_of(omitted, remainder)
    exchange = KEPT + omitted
    history = [turn(clock, "user", text(question)), *_replies(clock, exchange)]
    max_tokens = _estimate_keeping(question, exchange, KEPT) - under
    window = window_of(history, _limits(max_tokens))
    expected = _longest_within(question, exchange, max_tokens)
    assert expected == KEPT - under
    assert window.kept == 1 + expected
    assert window.turns[0].id == history[0].id
    assert [t.id for t in window.turns[1:]] == [t.id for t in history[-expected:]]
    assert window.omission is not None
    assert window.omission.omitted == exchange - expected
    # The opening is the question and the marker whose characters `_marker_units` counts.
    assert window.messages()[0]["content"] == [
        text(question),
        text(exchange_omission_marker(exchange - expected)),
    ]
    assert window.estimated_tokens == _estimate_keeping(question, exchange, expected)
    assert window.estimated_tokens <= max_tokens
    assert window.estimated_tokens == sum(
        estimate_content_tokens(message["content"]) for message in window.messages()
    )


# A count of one, two, three and four digits: the marker's own message, whatever its
# remainder.
NO_QUESTION_COUNTS = [9, 10, 100, 1000]


@pytest.mark.parametrize("omitted", NO_QUESTION_COUNTS)
@pytest.mark.parametrize("under", [0, 1], ids=["exactly at the budget", "one token under"])
def test_without_its_question_the_marker_message_is_counted_as_it_is_written(
    omitted: int, under: int
) -> None:
    exchange = KEPT + omitted
    history = _replies(Clock(), exchange)
    max_tokens = _estimate_keeping(None, exchange, KEPT) - under
    window = window_of(history, _limits(max_tokens))
    expected = _longest_within(None, exchange, max_tokens)
    assert window.kept == expected == KEPT - under
    assert window.omission is not None
    assert not window.omission.question_kept
    assert window.omission.omitted == exchange - expected
    assert window.messages()[0]["content"] == [
        text(NO_QUESTION_MARKER + "\n" + exchange_omission_marker(exchange - expected))
    ]
    assert window.estimated_tokens == _estimate_keeping(None, exchange, expected)
    assert window.estimated_tokens == sum(
        estimate_content_tokens(message["content"]) for message in window.messages()
    )


def test_the_budget_stops_a_tool_loop_before_a_call_whose_result_would_not_fit() -> None:
    # Newest first: the answer, then result and call pairs. The edge stays on a call, so a
    # pair goes in whole or not at all, and the pair that does not fit is not split.
    clock = Clock()
    question = "What changed in clause 7 since March?"
    turns = [turn(clock, "user", text(question))]
    for n in range(12):
        turns.append(turn(clock, "assistant", tool_use(f"t{n}", clause=7)))
        turns.append(turn(clock, "user", tool_result(f"t{n}", chars(200, "r"))))
    turns.append(turn(clock, "assistant", text(chars(REPLY_TOKENS, "a"))))
    exchange = len(turns) - 1

    def estimate(kept: int) -> int:
        newest = turns[len(turns) - kept :]
        return estimate_content_tokens(
            [text(question), text(exchange_omission_marker(exchange - kept))]
        ) + sum(estimate_content_tokens(list(t.content)) for t in newest)

    cap = 25
    # The answer, then three whole pairs: seven messages, on a call.
    at = estimate(7)
    for max_tokens, kept in [(at, 7), (at - 1, 5), (estimate(9) - 1, 7), (estimate(9), 9)]:
        limits = dataclasses.replace(
            default_limits(), max_tokens=max_tokens, max_messages=cap, floor_messages=1
        )
        window = window_of(turns, limits)
        assert window.kept == 1 + kept, max_tokens
        assert window.turns[1].role == "assistant"
        assert window.estimated_tokens == estimate(kept) <= max_tokens


def test_a_long_exchanges_window_keeps_nothing_by_the_floor_alone() -> None:
    # An omission leaves no run for a stable edge to hold: the floor kept is none.
    history = [turn(Clock(), "user", text("q")), *_replies(Clock(), 40)]
    window = window_of(history, _limits(10**6))
    assert window.omission is not None
    assert window.floor_kept == 0
