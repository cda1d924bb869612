"""The in-memory store keeps the DynamoDB store's contract: the same scenario, the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.conversation_store import (
    ConversationKey,
    ConversationStore,
    Duplicate,
    MessageTooLarge,
    StateChange,
    VersionConflict,
)
from adapters.dynamodb_store import DynamoDBConversationStore
from local.aws_resources import create_table
from memory_core.conversation import LateTurn
from memory_core.fold import next_fold
from memory_core.stable_window import StableEdge
from memory_core.turn_cap import Streak
from memory_core.turns import Turn
from memory_core.usage import TokenUsage
from tests.support.in_memory_store import InMemoryConversationStore

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
KEY = ConversationKey("acme", "c1")
CLOCK_SHIFT = [0.0]
"""Seconds the stores' wall clock runs ahead of NOW, for the TTL scenarios."""


@pytest.fixture(params=["dynamodb", "in-memory"])
def store(request, monkeypatch) -> Iterator[ConversationStore]:
    def clock() -> float:
        return NOW.timestamp() + CLOCK_SHIFT[0]

    CLOCK_SHIFT[0] = 0.0
    if request.param == "in-memory":
        yield InMemoryConversationStore(30, clock=clock)
        return
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "contract")
        yield DynamoDBConversationStore(client, "contract", 30, clock=clock)


def turn(n: int, role: str = "user", minutes: float | None = None) -> Turn:
    at = NOW - timedelta(minutes=100 - (n if minutes is None else minutes))
    return Turn(f"t{n:03d}", role, [{"text": f"turn {n}"}], at)  # type: ignore[arg-type]


def record(
    store: ConversationStore,
    t: Turn,
    version: int,
    lease: datetime | None = None,
    *,
    late: bool = False,
    memory_version: int = 0,
    lifetime_days: int = 30,
    edge: StableEdge | None = None,
) -> None:
    store.record_contact_turn(
        KEY,
        t,
        tokens=2,
        change=StateChange(
            version, Streak(version + 1, t.sent_at), (t.sent_at,), lease, late, stable_edge=edge
        ),
        turn_count=version + 1,
        decision="model",
        dropped=0,
        memory_version=memory_version,
        lifetime_days=lifetime_days,
        window_from=edge.oldest if edge else None,
    )


def snapshot_of(store: ConversationStore, before: Turn) -> tuple[Any, list[str]]:
    snap = store.snapshot(KEY, NOW - timedelta(days=30), before.position, 27)
    return snap.state, [t.id for t in snap.newest_first]


def test_turns_come_back_newest_first_before_the_current_one(store):
    for n in range(5):
        if n % 2 == 0:
            record(store, turn(n), n // 2)
        else:
            store.record_reply(KEY, turn(n, "assistant"), 3, lifetime_days=30)
    state, ids = snapshot_of(store, turn(9))
    assert ids == ["t004", "t003", "t002", "t001", "t000"]
    assert (state.turns_recorded, state.unfolded_tokens, state.unfolded_turns) == (5, 12, 5)
    assert state.version == 3
    assert snapshot_of(store, turn(2))[1] == ["t001", "t000"]


def test_turns_sharing_a_sent_at_come_back_in_the_order_they_were_recorded(store):
    question = Turn("b-question", "user", [{"text": "?"}], NOW, NOW)
    answer = Turn("a-answer", "assistant", [{"text": "!"}], NOW, NOW + timedelta(seconds=1))
    record(store, question, 0)
    store.record_reply(KEY, answer, 1, lifetime_days=30)
    later = Turn("later", "user", [{"text": "."}], NOW + timedelta(seconds=5))
    _, ids = snapshot_of(store, later)
    assert ids == ["a-answer", "b-question"]  # newest first: the answer was recorded last
    assert [s.turn.id for s in store.unfolded_turns(KEY, None, 10)] == ["b-question", "a-answer"]
    assert store.recorded(KEY, "a-answer").position == answer.position


def test_a_recorded_id_is_a_duplicate_and_a_stale_version_a_conflict(store):
    record(store, turn(0), 0)
    with pytest.raises(Duplicate) as duplicate:
        record(store, turn(0), 1)
    assert duplicate.value.first.turn_count == 1
    assert duplicate.value.first.position == turn(0).position
    with pytest.raises(VersionConflict):
        record(store, turn(1), 0)
    assert store.recorded(KEY, "t001") is None
    assert snapshot_of(store, turn(9))[1] == ["t000"]


def test_an_oversized_turn_is_refused_before_writing(store):
    huge = Turn("big", "user", [{"text": "x" * 420_000}], NOW)
    with pytest.raises(MessageTooLarge):
        record(store, huge, 0)
    assert store.state(KEY) is None


def test_history_range_and_ttl_bound_what_is_read(store):
    old = Turn("old", "user", [{"text": "old"}], NOW - timedelta(days=31))
    store.record_reply(KEY, old, 1, lifetime_days=30)
    record(store, turn(1), 0)
    assert snapshot_of(store, turn(9))[1] == ["t001"]


def test_folds_are_conditional_and_read_what_is_newer_than_the_watermark(store):
    for n in range(4):
        store.record_reply(KEY, turn(n, "assistant"), 5, lifetime_days=30)
    unfolded = store.unfolded_turns(KEY, None, 10)
    assert [s.turn.id for s in unfolded] == ["t000", "t001", "t002", "t003"]
    assert [s.tokens for s in unfolded] == [5, 5, 5, 5]
    assert not any(s.expired for s in unfolded)
    first = next_fold(None, [s.turn for s in unfolded[:3]], "one")
    mark = unfolded[2].turn.position
    assert commit(store, first, mark, expected=0)
    assert not commit(store, first, mark, expected=0)
    state = store.state(KEY)
    assert (state.fold, state.watermark, state.compaction_version) == (first, mark, 1)
    assert (state.unfolded_tokens, state.unfolded_turns) == (5, 1)
    assert [s.turn.id for s in store.unfolded_turns(KEY, state.watermark, 10)] == ["t003"]
    assert [s.turn.id for s in store.unfolded_turns(KEY, None, 2)] == ["t000", "t001"]


def commit(store, fold, mark, expected, *, tokens=15, turns=3, late_passed=0):
    return store.commit_fold(
        KEY,
        fold,
        watermark=mark,
        late_passed=late_passed,
        expected_version=expected,
        passed_tokens=tokens,
        passed_turns=turns,
    )


def test_a_turn_recorded_at_or_below_the_watermark_joins_the_late_list(store):
    for n in (0, 2, 4):
        store.record_reply(KEY, turn(n, "assistant"), 5, lifetime_days=30)
    unfolded = store.unfolded_turns(KEY, None, 10)
    assert commit(store, next_fold(None, [s.turn for s in unfolded], "x"), turn(4).position, 0)
    store.record_reply(KEY, turn(1, "assistant"), 4, lifetime_days=30)  # below the watermark: late
    store.record_reply(KEY, turn(5, "assistant"), 5, lifetime_days=30)  # above it
    state = store.state(KEY)
    assert state.late_turns == (LateTurn(turn(1).position, 4),)
    assert (state.turns_recorded, state.unfolded_turns, state.unfolded_tokens) == (5, 2, 9)
    assert [s.turn.id for s in store.turns_at(KEY, [turn(1).position, turn(7).position])] == [
        "t001"
    ]
    # A converse commit that did not know the turn was late is refused, so it reads again.
    with pytest.raises(VersionConflict):
        record(store, turn(3), 0)
    record(store, turn(3), 0, late=True)
    assert [e.position for e in store.state(KEY).late_turns] == [turn(1).position, turn(3).position]
    # A commit takes the late turns it read off the head of the list, and only those.
    store.record_reply(
        KEY, turn(6, "assistant", minutes=2.5), 1, lifetime_days=30
    )  # arrives meanwhile
    assert commit(store, None, None, 1, tokens=6, turns=2, late_passed=2)
    state = store.state(KEY)
    assert [e.position for e in state.late_turns] == [turn(6, minutes=2.5).position]
    assert (state.watermark, state.unfolded_turns) == (turn(4).position, 2)


def test_a_replys_usage_is_kept_beside_its_content_late_or_not_and_a_duplicate_keeps_it(store):
    reported = TokenUsage(12, 7, 2_067, cache_read_input_tokens=1_848, cache_write_input_tokens=200)
    without_cache = TokenUsage(10, 5)
    record(store, turn(0), 0)
    store.record_reply(KEY, turn(2, "assistant"), 3, lifetime_days=30, usage=reported)
    store.record_reply(KEY, turn(3, "assistant"), 3, lifetime_days=30)
    assert store.claim(KEY, turn(3).position, expected_version=0, expected_recorded=3)
    # Below the claim: the reply is late, recorded by the second commit, usage and all.
    store.record_reply(KEY, turn(1, "assistant"), 3, lifetime_days=30, usage=without_cache)
    assert [e.position for e in store.state(KEY).late_turns] == [turn(1).position]
    read = store.turns_at(KEY, [turn(n).position for n in range(4)])
    assert [(s.turn.id, s.usage) for s in read] == [
        ("t000", None),
        ("t001", without_cache),
        ("t002", reported),
        ("t003", None),
    ]
    assert [s.turn.content for s in read] == [[{"text": f"turn {n}"}] for n in range(4)]
    assert snapshot_of(store, turn(9))[1] == ["t003", "t002", "t001", "t000"]
    with pytest.raises(Duplicate):
        store.record_reply(KEY, turn(2, "assistant"), 3, lifetime_days=30, usage=without_cache)
    [again] = store.turns_at(KEY, [turn(2).position])
    assert again.usage == reported
    assert store.state(KEY).turns_recorded == 4


def test_a_claim_makes_later_turns_below_it_late_and_the_commit_clears_it(store):
    for n in (0, 2):
        store.record_reply(KEY, turn(n, "assistant"), 5, lifetime_days=30)
    # A claim taken on a stale read (a turn arrived since) is refused.
    assert not store.claim(KEY, turn(2).position, expected_version=0, expected_recorded=1)
    assert store.claim(KEY, turn(2).position, expected_version=0, expected_recorded=2)
    assert store.state(KEY).folding_through == turn(2).position
    store.record_reply(
        KEY, turn(1, "assistant"), 5, lifetime_days=30
    )  # arrives mid-compaction, below the claim
    store.record_reply(KEY, turn(3, "assistant"), 5, lifetime_days=30)
    state = store.state(KEY)
    assert [e.position for e in state.late_turns] == [turn(1).position]
    fold = next_fold(None, [turn(0), turn(2)], "x")
    assert commit(store, fold, turn(2).position, 0, tokens=10, turns=2)
    state = store.state(KEY)
    assert (state.folding_through, state.watermark, state.unfolded_turns) == (
        None,
        turn(2).position,
        2,
    )
    assert [e.position for e in state.late_turns] == [turn(1).position]  # for the next fold
    assert [s.turn.id for s in store.unfolded_turns(KEY, state.watermark, 10)] == ["t003"]


def test_expired_turns_come_back_marked_and_a_commit_may_only_move_the_watermark(store):
    old = Turn("old", "assistant", [{"text": "old"}], NOW - timedelta(days=29))
    store.record_reply(KEY, old, 1, lifetime_days=30)
    CLOCK_SHIFT[0] = timedelta(days=2).total_seconds()  # its 30-day TTL has passed
    record(store, turn(0), 0)
    found = store.unfolded_turns(KEY, None, 10)
    assert [(s.turn.id, s.expired) for s in found] == [("old", True), ("t000", False)]
    assert [s.expired for s in store.turns_at(KEY, [old.position])] == [True]
    assert commit(store, None, old.position, 0, tokens=1, turns=1)
    state = store.state(KEY)
    assert (state.fold, state.watermark, state.compaction_version) == (None, old.position, 1)
    assert (state.unfolded_tokens, state.unfolded_turns) == (2, 1)


def test_leases_are_taken_with_a_turn_and_given_back_or_cleared(store):
    lease = NOW + timedelta(minutes=15)
    record(store, turn(0), 0, lease=lease)
    assert store.state(KEY).lease_until == lease.replace(microsecond=0)
    store.release_lease(KEY, lease + timedelta(seconds=5))
    assert store.state(KEY).lease_until is not None
    store.release_lease(KEY, lease)
    assert store.state(KEY).lease_until is None
    record(store, turn(1), 1, lease=lease)
    store.clear_lease(KEY, expected_recorded=2)
    assert store.state(KEY).lease_until is None
    store.clear_lease(ConversationKey("acme", "nobody"), expected_recorded=0)


def test_clearing_the_lease_with_nothing_to_fold_settles_the_counters_at_zero(store):
    lease = NOW + timedelta(minutes=15)
    record(store, turn(0), 0, lease=lease)
    # A turn recorded since the compactor read (it read one): only the lease goes.
    store.clear_lease(KEY, expected_recorded=0)
    state = store.state(KEY)
    assert (state.lease_until, state.unfolded_turns, state.unfolded_tokens) == (None, 1, 2)
    # As read: nothing was above the watermark, so whatever the counters say is zero.
    record(store, turn(1), 1, lease=lease)
    store.clear_lease(KEY, expected_recorded=2)
    state = store.state(KEY)
    assert (state.lease_until, state.unfolded_turns, state.unfolded_tokens) == (None, 0, 0)


def test_expired_state_reads_as_a_fresh_conversation_keeping_its_version(store):
    record(store, turn(0), 0)
    CLOCK_SHIFT[0] = timedelta(days=31).total_seconds()
    state, ids = snapshot_of(store, turn(9))
    assert (state.version, state.streak.count, ids) == (1, 0, [])


def test_a_late_turn_does_not_bring_the_states_expiry_forward(store):
    record(store, turn(0), 0)
    late = Turn("late", "assistant", [{"text": "filed late"}], NOW - timedelta(days=29))
    store.record_reply(KEY, late, 2, lifetime_days=30)
    CLOCK_SHIFT[0] = timedelta(days=2).total_seconds()
    state, _ = snapshot_of(store, turn(9))
    assert state.version == 1
    assert state.turns_recorded == 2


def test_each_memory_written_is_kept_by_its_version(store):
    for n in range(4):
        store.record_reply(KEY, turn(n, "assistant"), 5, lifetime_days=30)
    unfolded = [s.turn for s in store.unfolded_turns(KEY, None, 10)]
    first = next_fold(None, unfolded[:2], "one", version=1)
    assert commit(store, first, unfolded[1].position, 0, tokens=10, turns=2)
    second = next_fold(first, unfolded[2:], "two", version=2)
    assert commit(store, second, unfolded[3].position, 1, tokens=10, turns=2)
    assert store.state(KEY).fold == second
    assert store.fold_at(KEY, 1) == first
    assert store.fold_at(KEY, 2) == second
    assert store.fold_at(KEY, 3) is None
    # A compactor that lost the race keeps nothing under its version.
    assert not commit(store, next_fold(second, unfolded[3:], "lost", version=2), None, 1)
    assert store.fold_at(KEY, 2) == second


def test_a_kept_memory_expires_after_twice_the_retention(store):
    record(store, turn(0), 0)
    first = next_fold(None, [turn(0)], "one", version=1)
    assert commit(store, first, turn(0).position, 0, tokens=2, turns=1)
    CLOCK_SHIFT[0] = timedelta(days=60).total_seconds() - 1
    assert store.fold_at(KEY, 1) == first
    CLOCK_SHIFT[0] = timedelta(days=60).total_seconds()
    assert store.fold_at(KEY, 1) is None


def test_the_marker_keeps_the_version_of_the_memory_served(store):
    record(store, turn(0), 0, memory_version=7)
    record(store, turn(1), 1)
    store.record_reply(KEY, turn(2, "assistant"), 1, lifetime_days=30)
    assert store.recorded(KEY, "t000").memory_version == 7
    assert store.recorded(KEY, "t001").memory_version == 0
    assert store.recorded(KEY, "t002").memory_version is None  # a reply answers nothing


def test_the_stable_edge_is_kept_in_the_state_and_the_marker_and_cleared_by_none(store):
    with_watermark = StableEdge(turn(0).position, 4, turn(0).position)
    record(store, turn(0), 0, edge=with_watermark)
    assert store.state(KEY).stable_edge == with_watermark
    assert store.recorded(KEY, "t000").window_from == turn(0).position
    # A new edge, no watermark yet: none is read back.
    without = StableEdge(turn(1).position, 0, None)
    record(store, turn(1), 1, edge=without)
    assert store.state(KEY).stable_edge == without
    store.record_reply(KEY, turn(2, "assistant"), 1, lifetime_days=30)
    assert store.state(KEY).stable_edge == without  # a reply leaves it alone
    record(store, turn(3), 2)
    assert store.state(KEY).stable_edge is None
    assert store.recorded(KEY, "t003").window_from is None
    assert store.recorded(KEY, "t000").window_from == turn(0).position


@pytest.mark.parametrize("lifetime_days", [30, 60])
def test_turns_live_their_lifetime_from_sent_at(store, lifetime_days):
    record(store, turn(0), 0, lifetime_days=lifetime_days)
    store.record_reply(KEY, turn(1, "assistant"), 1, lifetime_days=lifetime_days)
    to_expiry = (turn(0).sent_at + timedelta(days=lifetime_days) - NOW).total_seconds()
    CLOCK_SHIFT[0] = to_expiry - 1
    assert snapshot_of(store, turn(0))[1] == []  # nothing before the first turn
    later = Turn("late", "user", [{"text": "?"}], NOW)
    old_enough = store.snapshot(KEY, NOW - timedelta(days=365), later.position, 27)
    assert [t.id for t in old_enough.newest_first] == ["t001", "t000"]
    assert store.recorded(KEY, "t000") is not None
    CLOCK_SHIFT[0] = to_expiry + 60  # turn 1 was sent a minute after turn 0
    gone = store.snapshot(KEY, NOW - timedelta(days=365), later.position, 27)
    assert [t.id for t in gone.newest_first] == []
