from memory_core.coverage import held_by_neither
from tests.unit.conversation_builders import Clock, alternating


def positions(turns):
    return [t.position for t in turns]


def test_nothing_is_missing_when_the_fold_reaches_the_window():
    turns = alternating(Clock(), 10)
    passed_over = turns[:5][::-1]
    assert held_by_neither(passed_over, turns[5].position, turns[4].position) == []


def test_turns_between_the_watermark_and_the_window_are_held_by_neither():
    turns = alternating(Clock(), 10)
    gap = held_by_neither(turns[:7][::-1], turns[7].position, turns[3].position)
    assert gap == positions(turns[4:7])


def test_without_a_fold_everything_older_than_the_window_is_missing():
    turns = alternating(Clock(), 6)
    assert held_by_neither(turns[:2][::-1], turns[2].position, None) == positions(turns[:2])


def test_an_empty_window_leaves_everything_past_the_watermark_missing():
    turns = alternating(Clock(), 6)
    assert held_by_neither(turns[::-1], None, turns[1].position) == positions(turns[2:])
    assert held_by_neither(turns[::-1], None, turns[-1].position) == []


def test_a_late_turn_below_the_watermark_is_missing_until_it_is_folded():
    turns = alternating(Clock(), 10)
    late = {turns[2].position}
    passed_over = turns[:6][::-1]
    gap = held_by_neither(passed_over, turns[6].position, turns[5].position, late=late)
    assert gap == [turns[2].position]


def test_a_late_turn_older_than_what_the_window_read_is_found_through_the_late_list():
    turns = alternating(Clock(), 10)
    late = {turns[1].position, turns[8].position}  # turns[8] is in the window: held
    passed_over = turns[4:6][::-1]  # the window read no further back
    gap = held_by_neither(passed_over, turns[6].position, turns[5].position, late=late)
    assert gap == [turns[1].position]
    since = turns[2].sent_at  # turns[1] is out of the history range: not a candidate
    assert (
        held_by_neither(passed_over, turns[6].position, turns[5].position, late=late, since=since)
        == []
    )


def test_a_late_turn_newer_than_the_current_message_is_no_candidate():
    turns = alternating(Clock(), 4)
    late = {turns[3].position}
    assert held_by_neither([], None, turns[2].position, late=late, before=turns[1].position) == []
    assert held_by_neither([], None, turns[2].position, late=late, before=turns[3].position) == []
    gap = held_by_neither(
        [], None, turns[3].position, late={turns[0].position}, before=turns[2].position
    )
    assert gap == [turns[0].position]
