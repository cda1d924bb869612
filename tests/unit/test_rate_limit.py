"""The rate limit counts arrivals on the service's clock, and says how long to wait."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory_core.rate_limit import remember, seconds_until_free
from memory_core.rules import RateLimit

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
THREE_A_MINUTE = RateLimit(messages=3, perSeconds=60)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_no_limit_never_waits():
    assert seconds_until_free([at(0)] * 50, at(1), None) == 0
    assert remember([at(0)], at(1), None) == ()


def test_below_the_limit_there_is_no_wait():
    assert seconds_until_free([at(0), at(10)], at(20), THREE_A_MINUTE) == 0


def test_at_the_limit_the_wait_lasts_until_the_oldest_leaves_the_period():
    recent = [at(0), at(10), at(20)]
    assert seconds_until_free(recent, at(25), THREE_A_MINUTE) == 35
    assert seconds_until_free(recent, at(59), THREE_A_MINUTE) == 1


def test_a_part_second_wait_rounds_up_so_that_retrying_then_succeeds():
    recent = [at(0), at(10), at(20)]
    assert seconds_until_free(recent, at(59.5), THREE_A_MINUTE) == 1
    assert seconds_until_free(recent, at(0.25), THREE_A_MINUTE) == 60


def test_exactly_one_period_after_the_oldest_a_slot_is_free():
    recent = [at(0), at(10), at(20)]
    assert seconds_until_free(recent, at(60), THREE_A_MINUTE) == 0


def test_an_arrival_a_little_ahead_of_this_clock_still_counts():
    # Another instance's clock may run a little ahead of this one's.
    recent = [at(0), at(10), at(30.5)]
    assert seconds_until_free(recent, at(30), THREE_A_MINUTE) == 30


def test_only_the_newest_arrivals_are_remembered():
    assert remember([at(0), at(10), at(20)], at(30), THREE_A_MINUTE) == (at(10), at(20), at(30))


@given(
    gaps=st.lists(st.floats(min_value=0, max_value=120), min_size=1, max_size=30),
    messages=st.integers(min_value=1, max_value=5),
    per_seconds=st.integers(min_value=1, max_value=90),
)
def test_waiting_the_answer_always_lets_the_next_message_in(gaps, messages, per_seconds):
    limit = RateLimit(messages=messages, perSeconds=per_seconds)
    recent: tuple[datetime, ...] = ()
    now = T0
    for gap in gaps:
        now += timedelta(seconds=gap)
        wait = seconds_until_free(recent, now, limit)
        if wait:
            assert 1 <= wait <= per_seconds
            # One second sooner it would still be refused, unless the wait was rounded up.
            assert seconds_until_free(recent, now + timedelta(seconds=wait - 1), limit) or (
                wait == 1
            )
            now += timedelta(seconds=wait)
            assert seconds_until_free(recent, now, limit) == 0
        within = [t for t in recent if now - timedelta(seconds=per_seconds) < t]
        assert len(within) < messages
        recent = remember(recent, now, limit)
