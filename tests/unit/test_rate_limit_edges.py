"""The rate limit's edges: a period is open at its old end, N arrivals fill it, waits round up.

A limit of N messages per S seconds counts the arrivals within the S seconds
before this one, on the service's clock. An arrival exactly S seconds old has
left the period; one at the same instant as this one is inside it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.rate_limit import remember, seconds_until_free
from memory_core.rules import RateLimit

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# The clock's resolution: the smallest step a timestamp can take.
TICK = timedelta(microseconds=1)
ONE_A_MINUTE = RateLimit(messages=1, perSeconds=60)
TWO_A_MINUTE = RateLimit(messages=2, perSeconds=60)
THREE_A_MINUTE = RateLimit(messages=3, perSeconds=60)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_an_arrival_exactly_per_seconds_old_has_left_the_period():
    assert seconds_until_free([at(0)], at(60), ONE_A_MINUTE) == 0


def test_an_arrival_one_tick_under_per_seconds_old_still_counts():
    # The slot frees a microsecond later: a wait of one whole second.
    assert seconds_until_free([at(0)], at(60) - TICK, ONE_A_MINUTE) == 1


def test_an_arrival_one_tick_over_per_seconds_old_has_left_the_period():
    assert seconds_until_free([at(0)], at(60) + TICK, ONE_A_MINUTE) == 0


def test_an_arrival_at_the_same_instant_counts():
    assert seconds_until_free([at(0)], at(0), ONE_A_MINUTE) == 60


def test_arrivals_at_the_same_instant_each_count():
    # Two in one instant fill a limit of two; neither hides the other.
    assert seconds_until_free([at(5), at(5)], at(5), TWO_A_MINUTE) == 60
    assert seconds_until_free([at(5), at(5)], at(64), TWO_A_MINUTE) == 1
    assert seconds_until_free([at(5), at(5)], at(65), TWO_A_MINUTE) == 0


def test_one_fewer_than_the_limit_within_the_period_is_let_in():
    assert seconds_until_free([at(0), at(1)], at(2), THREE_A_MINUTE) == 0


def test_exactly_the_limit_within_the_period_is_refused():
    assert seconds_until_free([at(0), at(1), at(2)], at(3), THREE_A_MINUTE) == 57


def test_arrivals_outside_the_period_do_not_fill_it():
    # Three arrivals, but the oldest left the period exactly now: two remain.
    assert seconds_until_free([at(0), at(30), at(40)], at(60), THREE_A_MINUTE) == 0


def test_the_wait_runs_to_when_the_oldest_of_the_newest_n_leaves():
    # More arrivals than the limit are within (another instance wrote some): the
    # slot frees when the Nth newest leaves, not the oldest nor the newest.
    recent = [at(0), at(10), at(20), at(30), at(32)]
    assert seconds_until_free(recent, at(35), TWO_A_MINUTE) == 55


def test_the_arrivals_are_counted_in_time_order_whatever_order_they_are_given_in():
    recent = [at(30), at(0), at(32), at(20), at(10)]
    assert seconds_until_free(recent, at(35), TWO_A_MINUTE) == 55


@pytest.mark.parametrize(
    ("arrival", "wait"),
    [
        (at(25.5), 35),  # 34.5 seconds rounds up, not down
        (at(26), 34),  # a whole wait is not rounded further
        (at(59) + TICK, 1),  # a part of one second is a whole second
        (at(0) + TICK, 60),  # just under a period is a whole period
    ],
)
def test_a_wait_is_whole_seconds_rounded_up(arrival, wait):
    assert seconds_until_free([at(0), at(10), at(20)], arrival, THREE_A_MINUTE) == wait


def test_an_arrival_ahead_of_this_clock_makes_the_wait_longer_than_the_period():
    # Another instance's clock runs 10 seconds ahead: its arrival still counts.
    assert seconds_until_free([at(10)], at(0), ONE_A_MINUTE) == 70


def test_no_limit_never_refuses_and_remembers_nothing():
    assert seconds_until_free([at(0)] * 5, at(0), None) == 0
    assert remember([at(0)], at(0), None) == ()


def test_remember_keeps_the_newest_n_including_this_arrival_in_time_order():
    assert remember([at(20), at(0), at(10)], at(30), TWO_A_MINUTE) == (at(20), at(30))
    assert remember([at(0)], at(10), THREE_A_MINUTE) == (at(0), at(10))


def test_remember_keeps_a_newer_arrival_from_another_clock_over_this_one():
    # This arrival is the oldest of the three, so it is the one forgotten.
    assert remember([at(20), at(30)], at(10), TWO_A_MINUTE) == (at(20), at(30))


def test_remember_keeps_arrivals_at_the_same_instant_apart():
    assert remember([at(5)], at(5), TWO_A_MINUTE) == (at(5), at(5))


def reference_wait(recent: list[datetime], arrived_at: datetime, limit: RateLimit) -> int:
    """The fewest whole seconds after which a message is let in, by counting."""

    def free(when: datetime) -> bool:
        period = timedelta(seconds=limit.per_seconds)
        return sum(when - period < t for t in recent) < limit.messages

    wait = 0
    while not free(arrived_at + timedelta(seconds=wait)):
        wait += 1
    return wait


# Offsets on a coarse grid make exact edges (same instant, exactly a period) common.
offsets = st.one_of(
    st.integers(min_value=-20, max_value=120).map(float),
    st.floats(min_value=-20, max_value=120, allow_nan=False),
)
limits = st.builds(
    lambda messages, per_seconds: RateLimit(messages=messages, perSeconds=per_seconds),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=90),
)


@given(recent=st.lists(offsets, max_size=8), arrival=offsets, limit=limits)
def test_the_wait_is_the_fewest_whole_seconds_after_which_the_count_is_under_the_limit(
    recent, arrival, limit
):
    arrivals = [at(t) for t in recent]
    assert seconds_until_free(arrivals, at(arrival), limit) == reference_wait(
        arrivals, at(arrival), limit
    )


@given(recent=st.lists(offsets, max_size=8), arrival=offsets, later=offsets, limit=limits)
def test_what_remember_keeps_decides_every_later_check_as_all_arrivals_would(
    recent, arrival, later, limit
):
    everything = [*(at(t) for t in recent), at(arrival)]
    kept = remember([at(t) for t in recent], at(arrival), limit)
    assert len(kept) == min(len(everything), limit.messages)
    assert seconds_until_free(kept, at(later), limit) == seconds_until_free(
        everything, at(later), limit
    )
