"""Where each retained turn stands for the next call: one standing each, in the spec's order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.standing import (
    STANDINGS,
    ServedMemory,
    TurnStanding,
    counts,
    omitted_tokens,
    standings,
)
from memory_core.trim import omission_marker
from memory_core.turns import Role, Turn

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
SINCE = START + timedelta(days=10)


def turn(n: int, *, at: datetime | None = None, text: str | None = None) -> Turn:
    sent = at or START + timedelta(days=n)
    role: Role = "user" if n % 2 == 0 else "assistant"
    return Turn(f"t{n}", role, [{"text": text or f"turn {n}"}], sent, sent)


def cut(original: Turn, omitted: int) -> Turn:
    """`original` as a trim keeps it: head, marker, tail."""
    return original.with_content([{"text": f"head\n{omission_marker(omitted)}\ntail"}])


def of(found: dict[str, TurnStanding]) -> dict[str, str]:
    return {turn_id: standing.standing for turn_id, standing in found.items()}


def test_each_standing_on_its_own_turn():
    old, folded, gap, trimmed, whole = (turn(n) for n in (2, 11, 12, 13, 14))
    memory = ServedMemory(watermark=folded.position)

    found = standings(
        [old, folded, gap, trimmed, whole],
        [cut(trimmed, 321), whole],
        [True, False],
        memory=memory,
        since=SINCE,
    )

    assert of(found) == {
        "t2": "folded",  # older than the range, but the memory served holds it
        "t11": "folded",
        "t12": "held_by_neither",
        "t13": "trimmed",
        "t14": "window",
    }
    assert found["t13"].omitted_tokens == 321
    assert found["t14"].omitted_tokens == 0


def test_a_turn_in_the_window_and_in_the_memory_is_in_the_window():
    both = turn(11)
    found = standings(
        [both], [both], [False], memory=ServedMemory(watermark=both.position), since=SINCE
    )
    assert of(found) == {"t11": "window"}


def test_without_a_memory_old_turns_are_out_of_range_and_recent_ones_held_by_neither():
    old, recent = turn(3), turn(12)
    found = standings([old, recent], [], [], memory=None, since=SINCE)
    assert of(found) == {"t3": "out_of_range", "t12": "held_by_neither"}


def test_the_history_range_starts_at_since_itself():
    at_since = turn(0, at=SINCE)
    just_before = Turn("t1", "assistant", [{"text": "x"}], SINCE - timedelta(microseconds=1))
    found = standings([just_before, at_since], [], [], memory=None, since=SINCE)
    assert of(found) == {"t1": "out_of_range", "t0": "held_by_neither"}


def test_the_memory_holds_up_to_its_watermark_and_no_further():
    at_mark, after = turn(11), turn(12)
    found = standings(
        [at_mark, after], [], [], memory=ServedMemory(watermark=at_mark.position), since=SINCE
    )
    assert of(found) == {"t11": "folded", "t12": "held_by_neither"}


def test_a_late_turn_below_the_watermark_is_not_in_the_memory_yet():
    late, mark = turn(11), turn(12)
    memory = ServedMemory(watermark=mark.position, late=frozenset({late.position}))
    found = standings([late, mark], [], [], memory=memory, since=SINCE)
    assert of(found) == {"t11": "held_by_neither", "t12": "folded"}


def test_omitted_tokens_count_every_marker_the_trim_added_and_none_the_text_had():
    said = f"I pasted {omission_marker(7)} from another chat"
    original = Turn("t", "user", [{"text": said}, {"text": "x" * 900}], START, START)
    as_kept = original.with_content([{"text": said}, {"text": f"xx\n{omission_marker(200)}\nxx"}])
    assert omitted_tokens(original, as_kept) == 200


def test_markers_inside_tool_blocks_are_counted():
    original = Turn(
        "t",
        "user",
        [{"toolResult": {"toolUseId": "a", "content": [{"text": "r" * 900}]}}],
        START,
        START,
    )
    as_kept = original.with_content(
        [
            {
                "toolResult": {
                    "toolUseId": "a",
                    "content": [{"text": f"rr\n{omission_marker(150)}\nrr"}],
                }
            }
        ]
    )
    assert omitted_tokens(original, as_kept) == 150


def test_a_window_and_trim_flags_of_different_lengths_are_refused():
    one = turn(11)
    with pytest.raises(ValueError, match="zip"):
        standings([one], [one], [], memory=None, since=SINCE)


def test_counts_name_every_standing():
    found = {"a": TurnStanding("window"), "b": TurnStanding("window")}
    assert counts(found) == {
        "window": 2,
        "trimmed": 0,
        "folded": 0,
        "out_of_range": 0,
        "held_by_neither": 0,
    }
    assert tuple(counts({})) == STANDINGS


@given(
    days=st.lists(st.integers(0, 30), min_size=1, max_size=30),
    kept=st.integers(0, 30),
    trims=st.lists(st.booleans(), min_size=30, max_size=30),
    watermark=st.one_of(st.none(), st.integers(0, 29)),
)
def test_every_retained_turn_has_exactly_one_standing_and_the_window_keeps_its_own(
    days, kept, trims, watermark
):
    retained = [
        turn(n, at=START + timedelta(days=day, seconds=n)) for n, day in enumerate(sorted(days))
    ]
    window = retained[len(retained) - min(kept, len(retained)) :]
    flags = trims[: len(window)]
    memory = None
    if watermark is not None and watermark < len(retained):
        memory = ServedMemory(watermark=retained[watermark].position)

    found = standings(
        retained,
        [cut(t, 5) if trimmed else t for t, trimmed in zip(window, flags, strict=True)],
        flags,
        memory=memory,
        since=SINCE,
    )

    assert list(found) == [t.id for t in retained]
    assert sum(counts(found).values()) == len(retained)
    for t, trimmed in zip(window, flags, strict=True):
        assert found[t.id] == (TurnStanding("trimmed", 5) if trimmed else TurnStanding("window"))
    for t in retained[: len(retained) - len(window)]:
        expected = (
            "folded"
            if memory is not None and memory.holds(t.position)
            else "out_of_range"
            if t.sent_at < SINCE
            else "held_by_neither"
        )
        assert found[t.id].standing == expected
