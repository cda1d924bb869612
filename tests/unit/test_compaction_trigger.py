"""The compaction trigger's edges: reaching a trigger is enough, and a lease ends at its time.

A compaction is due when the unfolded tokens reach `MEMORY_FOLD_MIN_TOKENS`
or the unfolded turns reach half the window's message cap, and no lease is
held past now. A lease expiring exactly now no longer blocks: a lost
compaction must not hold folding back one tick longer than its lease.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.compaction_trigger import compaction_due, turn_trigger
from memory_core.conversation import NEW_CONVERSATION, ConversationState
from memory_core.settings import Settings

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)
SETTINGS = Settings()  # MEMORY_FOLD_MIN_TOKENS 2000, HISTORY_WINDOW_MAX_MESSAGES 25
TOKENS = SETTINGS.memory_fold_min_tokens
TURNS = turn_trigger(SETTINGS)


def state(
    tokens: int = 0, turns: int = 0, lease_until: datetime | None = None
) -> ConversationState:
    return ConversationState(unfolded_tokens=tokens, unfolded_turns=turns, lease_until=lease_until)


def settings_with_cap(max_messages: int) -> Settings:
    floor = min(max_messages, 10)
    return Settings(history_window_max_messages=max_messages, history_window_floor_messages=floor)


@pytest.mark.parametrize(
    ("max_messages", "trigger"),
    [(25, 12), (24, 12), (4, 2), (3, 1), (2, 1), (1, 1)],
)
def test_the_turn_trigger_is_half_the_cap_rounded_down_and_at_least_one(max_messages, trigger):
    # Never 0: a trigger of 0 turns would ask for a compaction with nothing to fold.
    assert turn_trigger(settings_with_cap(max_messages)) == trigger


def test_a_new_conversation_needs_no_compaction():
    assert not compaction_due(NEW_CONVERSATION, SETTINGS, NOW)


def test_unfolded_tokens_exactly_at_the_trigger_are_enough():
    assert compaction_due(state(tokens=TOKENS), SETTINGS, NOW)


def test_unfolded_tokens_one_below_the_trigger_are_not_enough():
    assert not compaction_due(state(tokens=TOKENS - 1, turns=TURNS - 1), SETTINGS, NOW)


def test_unfolded_turns_exactly_at_the_trigger_are_enough_whatever_their_tokens():
    # Many short turns would age out of the window by count before their tokens add up.
    assert compaction_due(state(tokens=0, turns=TURNS), SETTINGS, NOW)


def test_unfolded_turns_one_below_the_trigger_are_not_enough():
    assert not compaction_due(state(tokens=0, turns=TURNS - 1), SETTINGS, NOW)


def test_the_turn_trigger_follows_the_window_cap():
    small = settings_with_cap(4)
    assert compaction_due(state(turns=2), small, NOW)
    assert not compaction_due(state(turns=1), small, NOW)


def test_either_trigger_alone_is_enough():
    assert compaction_due(state(tokens=TOKENS, turns=0), SETTINGS, NOW)
    assert compaction_due(state(tokens=0, turns=TURNS), SETTINGS, NOW)
    assert compaction_due(state(tokens=TOKENS, turns=TURNS), SETTINGS, NOW)


def test_a_lease_held_past_now_blocks_another_compaction():
    assert not compaction_due(state(tokens=TOKENS, lease_until=NOW + TICK), SETTINGS, NOW)
    assert not compaction_due(state(turns=TURNS, lease_until=NOW + TICK), SETTINGS, NOW)


def test_a_lease_expiring_exactly_now_no_longer_blocks():
    assert compaction_due(state(tokens=TOKENS, lease_until=NOW), SETTINGS, NOW)


def test_a_lease_expired_a_tick_ago_no_longer_blocks():
    assert compaction_due(state(tokens=TOKENS, lease_until=NOW - TICK), SETTINGS, NOW)


def test_no_lease_does_not_make_a_compaction_due_by_itself():
    # An expired lease lets a due compaction through; it does not make one due.
    assert not compaction_due(state(lease_until=NOW - TICK), SETTINGS, NOW)
    assert not compaction_due(state(tokens=TOKENS - 1, lease_until=NOW), SETTINGS, NOW)


leases = st.one_of(st.none(), st.integers(min_value=-3, max_value=3).map(lambda n: NOW + n * TICK))
near_tokens = st.integers(min_value=TOKENS - 2, max_value=TOKENS + 2)
near_turns = st.integers(min_value=TURNS - 2, max_value=TURNS + 2)


@given(tokens=near_tokens, turns=near_turns, lease_until=leases)
def test_due_exactly_when_a_trigger_is_reached_and_no_lease_runs_past_now(
    tokens, turns, lease_until
):
    enough = tokens >= TOKENS or turns >= TURNS
    free = lease_until is None or lease_until <= NOW
    assert compaction_due(state(tokens, turns, lease_until), SETTINGS, NOW) is (enough and free)


@given(
    tokens=near_tokens,
    turns=near_turns,
    lease_until=leases,
    more=st.tuples(st.integers(min_value=0, max_value=3), st.integers(min_value=0, max_value=3)),
    later=st.integers(min_value=0, max_value=6),
)
def test_more_unfolded_or_a_later_clock_never_withdraws_a_due_compaction(
    tokens, turns, lease_until, more, later
):
    more_tokens, more_turns = more
    if compaction_due(state(tokens, turns, lease_until), SETTINGS, NOW):
        grown = state(tokens + more_tokens, turns + more_turns, lease_until)
        assert compaction_due(grown, SETTINGS, NOW + later * TICK)
