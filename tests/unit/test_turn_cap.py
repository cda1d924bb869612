from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.turn_cap import NO_STREAK, Streak, exceeds_cap, next_streak, streak_of
from tests.unit.conversation_builders import T0

MINUTE = timedelta(minutes=1)


def streaks(gaps: list[timedelta], idle_reset_hours: int = 24) -> list[Streak]:
    """The streak after each message, the first at T0, each next one a gap later."""
    result, streak, sent_at = [], NO_STREAK, T0
    for gap in [timedelta(0), *gaps]:
        sent_at += gap
        streak = next_streak(streak, sent_at, idle_reset_hours)
        result.append(streak)
    return result


def test_the_first_message_counts_one():
    assert next_streak(NO_STREAK, T0, 24) == Streak(1, T0)


def test_twenty_five_messages_then_a_25_hour_gap_reach_the_model_with_count_one():
    after = streaks([MINUTE] * 24 + [timedelta(hours=25)])
    assert after[24].count == 25
    assert not exceeds_cap(after[24], 25)
    assert after[25].count == 1
    assert not exceeds_cap(after[25], 25)


def test_the_26th_message_without_a_gap_escalates_and_so_does_every_later_one():
    after = streaks([MINUTE] * 30)
    assert [exceeds_cap(s, 25) for s in after] == [False] * 25 + [True] * 6


def test_escalation_ends_at_the_next_gap():
    after = streaks([MINUTE] * 29 + [timedelta(hours=24)])
    assert exceeds_cap(after[29], 25)
    assert after[30].count == 1


@pytest.mark.parametrize(
    ("gap", "count"),
    [(timedelta(hours=24), 1), (timedelta(hours=24) - timedelta(seconds=1), 2)],
)
def test_a_gap_of_at_least_idle_reset_hours_restarts_the_count(gap, count):
    assert streaks([gap])[1].count == count


def test_idle_reset_hours_is_the_tenants_own():
    assert streaks([timedelta(hours=3)], idle_reset_hours=2)[1].count == 1
    assert streaks([timedelta(hours=3)], idle_reset_hours=4)[1].count == 2


def test_a_late_out_of_order_message_counts_within_the_streak_and_keeps_the_last_time():
    streak = streak_of([T0, T0 + timedelta(hours=1)], 24)
    late = next_streak(streak, T0 - timedelta(hours=30), 24)
    assert late == Streak(3, T0 + timedelta(hours=1))


@given(st.lists(st.integers(min_value=0, max_value=60 * 60), max_size=60))
def test_the_streak_counts_messages_since_the_last_long_gap(gaps_in_minutes):
    gaps = [timedelta(minutes=m) for m in gaps_in_minutes]
    after = streaks(gaps)
    long_gaps = [i + 1 for i, gap in enumerate(gaps) if gap >= timedelta(hours=24)]
    since = long_gaps[-1] if long_gaps else 0
    assert after[-1].count == len(after) - since
    assert streak_of([T0 + sum(gaps[:i], timedelta(0)) for i in range(len(after))], 24) == after[-1]
