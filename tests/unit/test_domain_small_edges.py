"""Small edges of the domain: non-ASCII tool JSON, the coverage check's cutoff, the empty streak.

Each pins one boundary that a plausible slip (an escaped JSON text, a strict
comparison, a count starting at one) would move without any other test noticing.
"""

from __future__ import annotations

from datetime import timedelta

from memory_core.conversation import NEW_CONVERSATION
from memory_core.coverage import held_by_neither
from memory_core.history_range import history_cutoff, in_history_range
from memory_core.tokens import (
    block_units,
    estimate_content_tokens,
    estimate_tokens,
    readable_texts,
    text_units,
)
from memory_core.turn_cap import NO_STREAK, exceeds_cap, next_streak, streak_of
from memory_core.turns import Turn, TurnPosition
from tests.unit.conversation_builders import T0, text, tool_use

TICK = timedelta(microseconds=1)
JAPANESE = "日本語の契約書を検索"  # 10 characters; 60 as \uXXXX escapes


def test_a_tool_use_input_in_japanese_is_estimated_from_its_characters_not_escapes():
    call = tool_use("t1", q=JAPANESE * 40)
    as_sent = '{"toolUse":{"toolUseId":"t1","name":"lookup","input":{"q":"' + JAPANESE * 40 + '"}}}'
    assert block_units(call) == text_units(as_sent)
    # 400 characters of input plus the JSON around them, where escapes would be 2400.
    assert estimate_content_tokens([call]) == estimate_tokens(as_sent)
    assert estimate_content_tokens([call]) < 2400 // 4


def test_a_tool_use_input_in_japanese_reads_as_its_characters():
    # What the summariser reads: the input's JSON text, unescaped.
    call = tool_use("t1", name="検索", q=JAPANESE)
    assert list(readable_texts([call])) == ["検索", '{"q":"' + JAPANESE + '"}']


def test_a_json_tool_result_in_japanese_reads_as_its_characters():
    result = {"toolResult": {"toolUseId": "t1", "content": [{"json": {"答え": JAPANESE}}]}}
    assert list(readable_texts([result])) == ['{"答え":"' + JAPANESE + '"}']


def test_a_message_mixing_text_and_a_japanese_tool_call_counts_characters_throughout():
    call = tool_use("t1", q=JAPANESE)
    as_sent = '{"toolUse":{"toolUseId":"t1","name":"lookup","input":{"q":"' + JAPANESE + '"}}}'
    assert estimate_content_tokens([text(JAPANESE), call]) == estimate_tokens(JAPANESE + as_sent)


def position(sent_at_offset: timedelta, turn_id: str) -> TurnPosition:
    return Turn(turn_id, "user", [text("x")], T0 + sent_at_offset).position


CURRENT = T0 + timedelta(days=30)
SINCE = history_cutoff(CURRENT, 30)
WINDOW_OLDEST = position(timedelta(days=29), "w")
WATERMARK = position(timedelta(days=29, hours=12), "m")


def test_a_late_turn_sent_exactly_at_the_history_cutoff_is_a_candidate():
    assert in_history_range(SINCE, CURRENT, 30)
    at_cutoff = position(timedelta(0), "late")
    assert at_cutoff.sent_at == SINCE
    gap = held_by_neither([], WINDOW_OLDEST, WATERMARK, late={at_cutoff}, since=SINCE)
    assert gap == [at_cutoff]


def test_a_late_turn_sent_a_tick_before_the_history_cutoff_is_no_candidate():
    before_cutoff = position(-TICK, "late")
    assert not in_history_range(before_cutoff.sent_at, CURRENT, 30)
    assert held_by_neither([], WINDOW_OLDEST, WATERMARK, late={before_cutoff}, since=SINCE) == []


def test_a_late_turn_sent_a_tick_after_the_history_cutoff_is_a_candidate():
    after_cutoff = position(TICK, "late")
    gap = held_by_neither([], WINDOW_OLDEST, WATERMARK, late={after_cutoff}, since=SINCE)
    assert gap == [after_cutoff]


def test_a_late_turn_that_is_the_windows_oldest_is_held_by_the_window():
    assert held_by_neither([], WINDOW_OLDEST, WATERMARK, late={WINDOW_OLDEST}, since=SINCE) == []


def test_the_empty_streak_counts_zero():
    assert NO_STREAK.count == 0
    assert NO_STREAK.last_contact_at is None
    assert streak_of([], 24) == NO_STREAK
    assert NEW_CONVERSATION.streak.count == 0


def test_the_empty_streak_is_within_any_cap_and_its_first_message_counts_one():
    assert not exceeds_cap(NO_STREAK, 1)
    assert next_streak(NO_STREAK, T0, 24).count == NO_STREAK.count + 1
