"""The window's limits either side (SPEC 5.5.3-5.5.5): at the limit fits, one over does not.

Each test builds one history and computes the limit from it (the token
figures from the estimator, the message counts from the turns), then runs the
window at the limit and one below it, so the exchange under test either lands
exactly on the limit or crosses it by exactly one.
"""

from __future__ import annotations

from dataclasses import replace

from memory_core.tokens import estimate_turn_tokens
from memory_core.turns import Turn
from memory_core.window import WindowLimits, build_window
from tests.unit.conversation_builders import (
    Clock,
    CountingReader,
    default_limits,
    ids,
    text,
    turn,
    window_of,
)

# A floor of two keeps only the newest exchange: everything older is the extension's.
LIMITS = default_limits(HISTORY_WINDOW_FLOOR_MESSAGES="2")


def exchange(clock: Clock, question_chars: int, *answer_chars: int) -> list[Turn]:
    """A question of `question_chars` characters and an answer of each length given."""
    question = turn(clock, "user", text("q" * question_chars))
    return [question, *(turn(clock, "assistant", text("a" * n)) for n in answer_chars)]


def tokens_of(turns: list[Turn]) -> int:
    return sum(estimate_turn_tokens(t) for t in turns)


def budget_history() -> tuple[list[Turn], list[Turn], list[Turn]]:
    """A tiny older exchange, the exchange at the budget's edge, two newer exchanges.

    Lengths not divisible by four make each turn's estimate round up on its
    own: the budget is the sum of the turns' estimates, not of their characters.
    Every turn stays under the per-message budget, so nothing is trimmed.
    """
    clock = Clock()
    older = exchange(clock, 5, 5)
    edge = exchange(clock, 397, 3597)
    newer = [*exchange(clock, 2999, 2999), *exchange(clock, 2999, 2999)]
    assert all(estimate_turn_tokens(t) < LIMITS.trim.max_message_tokens for t in edge + newer)
    return [*older, *edge, *newer], edge, newer


def test_an_exchange_that_lands_exactly_on_the_token_budget_is_kept():
    history, edge, newer = budget_history()
    limits = replace(LIMITS, max_tokens=tokens_of(edge + newer))
    window = window_of(history, limits)
    assert ids(window.turns) == ids(edge + newer)
    assert window.estimated_tokens == limits.max_tokens


def test_an_exchange_that_crosses_the_token_budget_by_one_token_is_left_out_whole():
    history, edge, newer = budget_history()
    limits = replace(LIMITS, max_tokens=tokens_of(edge + newer) - 1)
    window = window_of(history, limits)
    # Neither the edge exchange nor its answer alone, nor the tiny exchange behind it.
    assert ids(window.turns) == ids(newer)
    assert window.estimated_tokens == tokens_of(newer)


def cap_history() -> tuple[list[Turn], list[Turn], list[Turn]]:
    """A short older exchange, an exchange of a question and two answers, two newer pairs."""
    clock = Clock()
    older = exchange(clock, 8, 8)
    edge = exchange(clock, 8, 8, 8)
    newer = [*exchange(clock, 8, 8), *exchange(clock, 8, 8)]
    return [*older, *edge, *newer], edge, newer


def test_an_extension_ending_exactly_on_the_message_cap_is_kept():
    history, edge, newer = cap_history()
    limits = replace(LIMITS, max_messages=len(edge + newer))
    reader = CountingReader(history)
    window = build_window(reader, limits, candidate_count=len(history))
    assert ids(window.turns) == ids(edge + newer)
    assert window.kept == limits.max_messages
    # It read one turn past the cap (the older exchange's answer) to know to stop there.
    assert reader.pulled == limits.max_messages + 1


def test_an_extension_one_message_over_the_cap_is_left_out_whole():
    history, edge, newer = cap_history()
    limits = replace(LIMITS, max_messages=len(edge + newer) - 1)
    window = window_of(history, limits)
    # The edge exchange's two answers alone would fit the cap, but never part of one.
    assert ids(window.turns) == ids(newer)


def floor_history() -> tuple[list[Turn], list[Turn], list[Turn]]:
    """Newest first: answer, question, then three answers of an older exchange and its question."""
    clock = Clock()
    older = exchange(clock, 8, 8)
    unfinished = exchange(clock, 8, 8, 8, 8)
    newest = exchange(clock, 8, 8)
    return [*older, *unfinished, *newest], unfinished, newest


def floor_limits(newest: list[Turn], max_messages: int) -> WindowLimits:
    # The floor's oldest message is the unfinished exchange's newest answer.
    return replace(LIMITS, floor_messages=len(newest) + 1, max_messages=max_messages)


def test_a_floor_moving_outward_onto_a_question_exactly_at_the_cap_keeps_it():
    history, unfinished, newest = floor_history()
    limits = floor_limits(newest, max_messages=len(unfinished + newest))
    window = window_of(history, limits)
    assert ids(window.turns) == ids(unfinished + newest)
    assert window.floor_kept == limits.max_messages


def test_a_floor_whose_question_lies_one_past_the_cap_drops_the_unfinished_exchange():
    history, unfinished, newest = floor_history()
    limits = floor_limits(newest, max_messages=len(unfinished + newest) - 1)
    window = window_of(history, limits)
    assert ids(window.turns) == ids(newest)
    assert window.floor_kept == len(newest)
