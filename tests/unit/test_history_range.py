from datetime import UTC, datetime, timedelta

import pytest

from memory_core.history_range import (
    expires_at,
    history_cutoff,
    in_history_range,
    is_expired,
    turn_lifetime_days,
)
from tests.unit.conversation_builders import T0


@pytest.mark.parametrize(
    ("age", "inside"),
    [
        (timedelta(days=29), True),
        (timedelta(days=31), False),
        (timedelta(days=30), True),
        (timedelta(days=30, seconds=1), False),
        (timedelta(0), True),
    ],
)
def test_history_reaches_back_history_days_from_the_current_message(age, inside):
    assert in_history_range(T0 - age, T0, 30) is inside


def test_the_range_follows_the_conversations_clock_not_the_wall_clock():
    replayed = datetime(2020, 1, 31, tzinfo=UTC)
    assert in_history_range(replayed - timedelta(days=6), replayed, 7)
    assert history_cutoff(replayed, 7) == replayed - timedelta(days=7)


def test_a_turns_ttl_is_its_sent_at_plus_the_retention_in_epoch_seconds():
    assert expires_at(T0, 30) == int(T0.timestamp()) + 30 * 86_400


def test_an_item_past_its_ttl_is_expired_though_dynamodb_has_not_deleted_it():
    ttl = expires_at(T0, 30)
    assert not is_expired(ttl, T0 + timedelta(days=29))
    assert is_expired(ttl, T0 + timedelta(days=30))
    assert is_expired(ttl, T0 + timedelta(days=33))


def test_a_turn_lives_history_days_past_the_newest_message_that_can_see_it():
    assert turn_lifetime_days(30, 30) == 60  # the defaults: a message may be 30 days late
    assert turn_lifetime_days(30, 15) == 30  # the retention already covers it
    assert turn_lifetime_days(30, 16) == 32  # one day more than the retention
    assert turn_lifetime_days(365, 30) == 365
    assert turn_lifetime_days(1, 1) == 2
