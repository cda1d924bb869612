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
    # An ideograph costs 65 units: 64 of them are 65 tokens, and one more is a token more.
    clock = Clock()
    older = [turn(clock, "user", text("旧" * 320)), turn(clock, "assistant", text("答" * 640))]
    newer = [turn(clock, "user", text("新" * 512)), turn(clock, "assistant", text("語" * 896))]
    budget = 325 + 650 + 520 + 910
    window = window_of([*older, *newer], replace(LIMITS, max_tokens=budget))
    assert ids(window.turns) == ids([*older, *newer])
    assert window.estimated_tokens == budget
    window = window_of([*older, *newer], replace(LIMITS, max_tokens=budget - 1))
    assert ids(window.turns) == ids(newer)
    longer = [turn(clock, "user", text("旧" * 321)), older[1]]  # 20,865 units: 327 tokens
    window = window_of([*longer, *newer], replace(LIMITS, max_tokens=budget))
    assert ids(window.turns) == ids(newer)
    # At a quarter token a character, all four would have fit in 2,368 / 4 = 592 tokens.
    window = window_of([*older, *newer], replace(LIMITS, max_tokens=592))
    assert ids(window.turns) == ids(newer)


def test_a_turn_in_cyrillic_and_emoji_is_estimated_by_its_script_when_read():
    clock = Clock()
    history = [
        turn(clock, "user", text("Привет" * 10)),  # 60 letters of 34 units, 2,040: 32 tokens
        turn(clock, "assistant", text("👍" * 10)),  # 10 of 133 units, 1,330: 21 tokens
    ]
    window = window_of(history)
    assert window.turn_tokens == (32, 21)
    assert [estimate_turn_tokens(t) for t in history] == [32, 21]


def test_a_cjk_message_over_the_per_message_budget_is_trimmed_by_tokens_in_the_window():
    clock = Clock()
    long = turn(clock, "assistant", text("語" * 985))  # 64,025 units: 1,001 tokens
    question = turn(clock, "user", text("何?"))
    window = window_of([question, long])
    assert window.trimmed_turns == (False, True)
    kept = window.turns[1].content[0]["text"]
    # 400 tokens (25,600 units) hold 393 ideographs (25,545); the 199 cut cost 12,935
    # units, 203 tokens.
    assert kept == "語" * 393 + "\n… 203 tokens omitted …\n" + "語" * 393
    # Head and tail, the marker (two "…", three digits, 13 letters, four spaces) and its
    # two line breaks: 51,421 units.
    units = 2 * 393 * 65 + (2 * 15 + 3 * 32 + 13 * 13 + 4) + 2 * 16
    assert window.turn_tokens[1] == -(-units // 64) == 804
    assert window.turn_tokens[1] == estimate_content_tokens(window.turns[1].content)


def test_a_long_exchanges_opening_is_its_question_and_marker_costed_as_one_message():
    # A question of one Cyrillic letter (34 units) and the marker round once, to 8 tokens:
    # apart they would round up twice, to 1 + 8.
    clock = Clock()
    question = turn(clock, "user", text("ж"))
    loop = [turn(clock, "assistant", text("a" * 8)) for _ in range(50)]
    limits = replace(LIMITS, max_messages=5, floor_messages=2)
    window = build_window(reversed([question, *loop]), limits, candidate_count=51)
    assert window.omission is not None
    messages = window.messages()
    opening = estimate_content_tokens(messages[0]["content"])
    marker = messages[0]["content"][-1]["text"]
    assert marker == "… 46 messages of this exchange omitted …"
    # Two "…" (15 units each), two digits (32), 29 letters (13) and seven spaces (1).
    marker_units = 2 * 15 + 2 * 32 + 29 * 13 + 7
    assert marker_units == 478
    assert opening == -(-(34 + marker_units) // 64) == 8
    assert estimate_content_tokens([text(marker)]) == -(-marker_units // 64) == 8
    assert opening < 1 + estimate_content_tokens([text(marker)])
    assert window.estimated_tokens == sum(estimate_content_tokens(m["content"]) for m in messages)
