"""The fence of an erase (memory_core.erasure): what it hides, and where a new turn goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory_core.conversation import Fold
from memory_core.erasure import RESOLUTION, erased, marker_erased, memory_erased, placed_after
from memory_core.turns import Turn, TurnPosition

FENCE = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
instants = st.datetimes(
    min_value=datetime(2026, 4, 1), max_value=datetime(2026, 6, 1), timezones=st.just(UTC)
)


def position(sent: datetime, recorded: datetime | None = None) -> TurnPosition:
    return TurnPosition(sent, recorded or sent, "t")


def test_a_turn_sent_at_the_fence_is_erased_and_one_a_microsecond_after_is_not():
    assert erased(position(FENCE), FENCE)
    assert erased(position(FENCE - RESOLUTION), FENCE)
    assert not erased(position(FENCE + RESOLUTION), FENCE)
    assert not erased(position(FENCE - timedelta(days=300)), None)


def test_a_marker_recorded_at_the_fence_is_erased_and_one_after_it_is_not():
    assert marker_erased(FENCE, FENCE)
    assert not marker_erased(FENCE + RESOLUTION, FENCE)
    assert not marker_erased(FENCE, None)


def memory_until(until: datetime) -> Fold:
    return Fold("the gist", until - timedelta(days=3), until, 12, version=4)


def test_a_memory_ending_at_the_fence_is_erased_and_one_ending_after_it_is_not():
    """A memory of turns at or before the erase is never served again; one made after it
    covers turns placed after the fence only."""
    assert memory_erased(memory_until(FENCE), FENCE)
    assert memory_erased(memory_until(FENCE - RESOLUTION), FENCE)
    assert not memory_erased(memory_until(FENCE + RESOLUTION), FENCE)
    assert not memory_erased(memory_until(FENCE), None)


@given(sent=instants, arrival=st.timedeltas(timedelta(0), timedelta(days=2)), now=instants)
def test_a_turn_placed_after_the_fence_is_never_erased_and_keeps_what_it_said(sent, arrival, now):
    turn = Turn("t", "user", ({"text": "hello"},), sent, sent + arrival)

    placed = placed_after(turn, FENCE, now)

    assert not erased(placed.position, FENCE)
    assert not marker_erased(placed.position.recorded_at, FENCE)
    assert placed.sent_at <= placed.position.recorded_at
    assert (placed.id, placed.role, placed.content) == (turn.id, turn.role, turn.content)
    if sent > FENCE:
        assert placed is turn  # already after it: untouched, its arrival too
    else:
        assert placed.sent_at == FENCE + RESOLUTION
        assert placed.position.recorded_at == max(sent + arrival, now, FENCE + RESOLUTION)
        assert placed.stated_sent_at == sent


def test_without_a_fence_a_turn_stays_where_it_was():
    turn = Turn("t", "user", ({"text": "hello"},), FENCE, FENCE)
    assert placed_after(turn, None, FENCE + timedelta(days=1)) is turn


def test_a_turn_that_already_had_a_stated_time_keeps_the_one_its_sender_gave():
    stated = FENCE + timedelta(hours=1)
    turn = Turn("t", "user", ({"text": "hi"},), FENCE, FENCE, stated_sent_at=stated)
    assert placed_after(turn, FENCE, FENCE).stated_sent_at == stated


def test_a_turn_sent_exactly_at_the_fence_is_placed_one_microsecond_after_it():
    turn = Turn("t", "user", ({"text": "hi"},), FENCE, FENCE)
    placed = placed_after(turn, FENCE, FENCE - timedelta(seconds=5))  # the writer's clock behind
    assert (placed.sent_at, placed.position.recorded_at) == (
        FENCE + timedelta(microseconds=1),
        FENCE + timedelta(microseconds=1),
    )


def test_a_turn_placed_after_the_fence_keeps_an_arrival_later_than_the_clock():
    arrived = FENCE + timedelta(minutes=3)
    turn = Turn("t", "user", ({"text": "hi"},), FENCE - timedelta(hours=1), arrived)
    assert placed_after(turn, FENCE, FENCE).position.recorded_at == arrived


def test_a_turn_not_yet_recorded_arrives_now_when_placed_after_the_fence():
    turn = Turn("t", "user", ({"text": "hi"},), FENCE - timedelta(hours=1))
    now = FENCE + timedelta(seconds=2)
    assert placed_after(turn, FENCE, now).position.recorded_at == now
