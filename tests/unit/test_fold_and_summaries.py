from datetime import timedelta

import pytest

from adapters.summariser import OfflineSummariser, cap_summary, transcript
from memory_core.fold import alive, next_fold
from memory_core.tokens import estimate_tokens
from tests.unit.conversation_builders import Clock, alternating, text, tool_result, turn


def test_the_first_fold_covers_from_its_oldest_to_its_newest_turn():
    turns = alternating(Clock(), 6)
    fold = next_fold(None, turns, "summary")
    assert fold.turns_folded == 6
    assert fold.covers_from == turns[0].sent_at
    assert fold.covers_until == turns[-1].sent_at
    # Written by no known compaction version: 0, as the memory's "not known".
    assert fold.version == 0
    assert next_fold(fold, alternating(Clock(), 2), "two", version=7).version == 7


def test_a_later_fold_keeps_its_start_and_moves_its_end():
    clock = Clock()
    first = next_fold(None, alternating(clock, 4), "one")
    newer = alternating(clock, 3)
    second = next_fold(first, newer, "two")
    assert second.turns_folded == 7
    assert second.covers_from == first.covers_from
    assert second.covers_until == newer[-1].sent_at


def test_a_fold_of_nothing_is_refused():
    with pytest.raises(ValueError, match="at least one turn"):
        next_fold(None, [], "empty")


def test_the_transcript_labels_who_spoke():
    clock = Clock()
    turns = [
        turn(clock, "user", text("Is the fee 1,200 EUR?")),
        turn(clock, "assistant", text("Yes.")),
        turn(clock, "user", tool_result("t1", "fee table")),
    ]
    lines = transcript(turns).splitlines()
    assert lines[0].endswith("Contact: Is the fee 1,200 EUR?")
    assert lines[1].endswith("Agent: Yes.")
    assert lines[2].endswith("Tool result: fee table")


def test_the_offline_summary_is_deterministic_and_extractive():
    turns = alternating(Clock(), 4, tokens_each=5)
    summariser = OfflineSummariser()
    first = summariser.summarise(None, turns, 800)
    assert first == summariser.summarise(None, turns, 800)
    assert first.text.splitlines()[0] == "[2026-11-01 09:01–09:04, 4 turns]"
    assert first.text.count("\n- ") == 4  # a point a turn
    assert first.input_tokens == estimate_tokens(transcript(turns))


def test_the_offline_summary_folds_onto_the_previous_one():
    clock = Clock()
    summariser = OfflineSummariser()
    first = summariser.summarise(None, [turn(clock, "user", text("Fee is 1,200. Thanks"))], 800)
    second = summariser.summarise(
        first.text, [turn(clock, "assistant", text("Due 15 March."))], 800
    )
    assert first.text == "[2026-11-01 09:01, 1 turn]\n- Contact: Fee is 1,200."
    assert second.text == first.text + "\n[2026-11-01 09:02, 1 turn]\n- Agent: Due 15 March."


@pytest.mark.parametrize("cap", [50, 100, 800])
def test_the_offline_summary_stays_within_its_cap_and_says_what_it_left_out(cap):
    clock = Clock(step=timedelta(hours=1))
    turns = [turn(clock, "user", text(f"point number {n} about the lease")) for n in range(300)]
    summary = OfflineSummariser().summarise(None, turns, cap).text
    assert estimate_tokens(summary) <= cap
    assert summary.startswith("[2026-11-01 10:00 – 2026-11-13 21:00, 300 turns]\n")
    assert "point number 0" in summary
    assert "\n- … Contact: point number" in summary  # points left out, and where


def test_a_capped_summary_is_cut_visibly():
    capped = cap_summary("x" * 10_000, 100)
    assert estimate_tokens(capped) <= 100 + 10
    assert "tokens omitted" in capped


def test_a_fold_lives_as_long_as_its_newest_turn():
    turns = alternating(Clock(), 2)
    fold = next_fold(None, turns, "summary")
    newest = turns[-1].sent_at
    assert alive(fold, newest + timedelta(days=30) - timedelta(seconds=1), 30) is fold
    assert alive(fold, newest + timedelta(days=30), 30) is None
    assert alive(None, newest, 30) is None
