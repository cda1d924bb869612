"""The window's budgets in every script: the estimate that fills them counts by script.

A history in Chinese, Russian or emoji fills the token budget at its own cost a
character, one turn at exactly the budget kept and one character over dropped; a
long exchange's opening (its question with the marker) is costed as one message.
"""

from __future__ import annotations

from dataclasses import replace

from memory_core.tokens import estimate_content_tokens, estimate_turn_tokens
from memory_core.window import build_window
from tests.unit.conversation_builders import (
    Clock,
    default_limits,
    ids,
    text,
    turn,
    window_of,
)

LIMITS = default_limits(HISTORY_WINDOW_FLOOR_MESSAGES="2")


def test_a_cjk_exchange_exactly_on_the_budget_is_kept_and_one_character_more_is_not():
    clock = Clock()
    older = [turn(clock, "user", text("旧" * 300)), turn(clock, "assistant", text("答" * 600))]
    newer = [turn(clock, "user", text("新" * 500)), turn(clock, "assistant", text("語" * 900))]
    budget = 300 + 600 + 500 + 900
    window = window_of([*older, *newer], replace(LIMITS, max_tokens=budget))
    assert ids(window.turns) == ids([*older, *newer])
    assert window.estimated_tokens == budget
    window = window_of([*older, *newer], replace(LIMITS, max_tokens=budget - 1))
    assert ids(window.turns) == ids(newer)
    # Under the seed's characters / 4, all four would have fit in 575 tokens.
    window = window_of([*older, *newer], replace(LIMITS, max_tokens=575))
    assert ids(window.turns) == ids(newer)


def test_a_turn_in_cyrillic_and_emoji_is_estimated_by_its_script_when_read():
    clock = Clock()
    history = [
        turn(clock, "user", text("Привет" * 10)),  # 60 letters of 33 units: 31 tokens
        turn(clock, "assistant", text("👍" * 10)),  # 20 tokens
    ]
    window = window_of(history)
    assert window.turn_tokens == (31, 20)
    assert [estimate_turn_tokens(t) for t in history] == [31, 20]


def test_a_cjk_message_over_the_per_message_budget_is_trimmed_by_tokens_in_the_window():
    clock = Clock()
    long = turn(clock, "assistant", text("語" * 1001))
    question = turn(clock, "user", text("何?"))
    window = window_of([question, long])
    assert window.trimmed_turns == (False, True)
    kept = window.turns[1].content[0]["text"]
    assert kept == "語" * 400 + "\n… 201 tokens omitted …\n" + "語" * 400
    assert window.turn_tokens[1] == estimate_content_tokens(window.turns[1].content) == 806


def test_a_long_exchanges_opening_is_its_question_and_marker_costed_as_one_message():
    # A question of one Cyrillic letter (33 units) and the marker (ASCII-cost) round once:
    # apart they would round up twice.
    clock = Clock()
    question = turn(clock, "user", text("ж"))
    loop = [turn(clock, "assistant", text("a" * 8)) for _ in range(110)]
    limits = replace(LIMITS, max_messages=5, floor_messages=2)
    window = build_window(reversed([question, *loop]), limits, candidate_count=111)
    assert window.omission is not None
    messages = window.messages()
    opening = estimate_content_tokens(messages[0]["content"])
    marker = messages[0]["content"][-1]["text"]
    assert len(marker) == 41  # "… 10N messages of this exchange omitted …": 656 units
    assert opening == -(-(33 + 16 * len(marker)) // 64)
    assert opening < 1 + estimate_content_tokens([text(marker)])
    assert window.estimated_tokens == sum(estimate_content_tokens(m["content"]) for m in messages)
