from memory_core.coverage import held_by_neither
from tests.unit.conversation_builders import Clock, alternating, ids


def test_nothing_is_missing_when_the_fold_reaches_the_window():
    turns = alternating(Clock(), 10)
    assert held_by_neither(turns, turns[5].position, turns[4].position) == []


def test_turns_between_the_watermark_and_the_window_are_held_by_neither():
    turns = alternating(Clock(), 10)
    gap = held_by_neither(turns, turns[7].position, turns[3].position)
    assert ids(gap) == ids(turns[4:7])


def test_without_a_fold_everything_older_than_the_window_is_missing():
    turns = alternating(Clock(), 6)
    assert ids(held_by_neither(turns, turns[2].position, None)) == ids(turns[:2])


def test_an_empty_window_leaves_everything_past_the_watermark_missing():
    turns = alternating(Clock(), 6)
    assert ids(held_by_neither(turns, None, turns[1].position)) == ids(turns[2:])
    assert held_by_neither(turns, None, turns[-1].position) == []
