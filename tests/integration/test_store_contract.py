"""The in-memory store keeps the DynamoDB store's contract: the same scenario, the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.conversation_store import (
    ContactEntry,
    ContactsPosition,
    ConversationKey,
    ConversationStore,
    Deleted,
    Duplicate,
    ErasedSince,
    Fence,
    MessageTooLarge,
    StateChange,
    TurnsPage,
    VersionConflict,
)
from adapters.dynamodb_items import STATE_SK, marker_sort_key, shard_of, turn_sort_key
from adapters.dynamodb_store import DynamoDBConversationStore
from local.aws_resources import create_table
from memory_core.conversation import ConversationState, LateTurn
from memory_core.erasure import placed_after
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
    erased_at: datetime | None = None,
    listed: bool = False,
    key: ConversationKey = KEY,
) -> None:
    store.record_contact_turn(
        key,
        t,
        tokens=2,
        change=StateChange(
            version,
            Streak(version + 1, t.sent_at),
            (t.sent_at,),
            lease,
            late,
            stable_edge=edge,
            erased_at=erased_at,
            list_contact=listed,
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
    store.clear_lease(KEY, expected_recorded=2, expected_version=0)
    assert store.state(KEY).lease_until is None
    store.clear_lease(ConversationKey("acme", "nobody"), expected_recorded=0, expected_version=0)


def test_clearing_the_lease_with_nothing_to_fold_settles_the_counters_at_zero(store):
    lease = NOW + timedelta(minutes=15)
    record(store, turn(0), 0, lease=lease)
    # A turn recorded since the compactor read (it read one): only the lease goes.
    store.clear_lease(KEY, expected_recorded=0, expected_version=0)
    state = store.state(KEY)
    assert (state.lease_until, state.unfolded_turns, state.unfolded_tokens) == (None, 1, 2)
    # As read: nothing was above the watermark, so whatever the counters say is zero.
    record(store, turn(1), 1, lease=lease)
    store.clear_lease(KEY, expected_recorded=2, expected_version=0)
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


# -- a conversation's data: the erase, the export, the contacts listing -------------------

FENCE = NOW
"""The erase's instant: after every `turn(n)` (n < 100)."""
ERASED = ConversationState(version=3, compaction_version=2, erased_at=FENCE)
"""What an erase leaves of `build_a_conversation`: the fence and the two locks moved on."""
LATER = Turn("later", "user", [{"text": "."}], NOW + timedelta(hours=1))


def again(n: int, role: str = "user") -> Turn:
    """Message id `t<n>` sent again after the erase: a new message."""
    at = FENCE + timedelta(minutes=1 + n)
    return Turn(f"t{n:03d}", role, [{"text": f"anew {n}"}], at)  # type: ignore[arg-type]


def build_a_conversation(store: Any) -> None:
    """Messages, replies, a memory kept, a lease and an edge: all an erase has to take.

    Eleven items: four turns, their four markers, the memory served, the memory kept
    and the state.
    """
    record(store, turn(0), 0, listed=True)
    store.record_reply(KEY, turn(1, "assistant"), 3, lifetime_days=30, usage=TokenUsage(1, 2))
    edge = StableEdge(turn(0).position, 1, turn(1).position)
    record(store, turn(2), 1, lease=NOW + timedelta(minutes=15), edge=edge)
    unfolded = [s.turn for s in store.unfolded_turns(KEY, None, 10)]
    first = next_fold(None, unfolded[:2], "one", version=1)
    assert commit(store, first, unfolded[1].position, 0, tokens=5, turns=2)
    store.record_reply(KEY, turn(3, "assistant"), 3, lifetime_days=30)


def stored_keys(store: Any, key: ConversationKey = KEY) -> list[str]:
    """Every item stored for the conversation, by sort key; on DynamoDB, a table scan."""
    if isinstance(store, InMemoryConversationStore):
        return store.item_keys(key)
    items = store._client.scan(TableName="contract", ConsistentRead=True)["Items"]
    return sorted(item["SK"]["S"] for item in items if item["PK"]["S"] == key.partition)


def ids(turns: list[Any]) -> list[str]:
    return [stored.turn.id for stored in turns]


def test_an_erase_hides_every_turn_marker_memory_and_counter_at_once(store):
    build_a_conversation(store)
    assert store.state(KEY).listed
    assert store.fence_off(KEY, FENCE) == Fence(FENCE, 2, state_erased=True)
    # Nothing is deleted yet; nothing is served either.
    assert len(stored_keys(store)) == 11
    assert store.state(KEY) == ERASED
    assert snapshot_of(store, LATER) == (ERASED, [])
    assert store.unfolded_turns(KEY, None, 10, erased_at=FENCE) == []
    assert store.turns_page(KEY, None, 10) == TurnsPage([], None, stored=False)
    # Until the deletion, a raw read still finds them: the fence is what hides them.
    assert ids(store.unfolded_turns(KEY, None, 10)) == ["t000", "t001", "t002", "t003"]
    # An old message id sent again is a new message once the writer knows the fence.
    with pytest.raises(Duplicate):
        record(store, again(0), ERASED.version)
    record(store, again(0), ERASED.version, erased_at=FENCE, listed=True)
    store.record_reply(KEY, again(1, "assistant"), 3, lifetime_days=30, erased_at=FENCE)
    assert store.recorded(KEY, "t000").position == again(0).position
    assert store.recorded(KEY, "t000").turn_count == ERASED.version + 1
    assert store.recorded(KEY, "t001").position == again(1).position
    # The new conversation starts from nothing: counters, memory, marks, edge, lease.
    state, newest_first = snapshot_of(store, LATER)
    assert newest_first == ["t001", "t000"]
    assert (state.version, state.turns_recorded, state.unfolded_turns, state.unfolded_tokens) == (
        4,
        2,
        2,
        5,
    )
    assert (state.fold, state.watermark, state.late_turns, state.stable_edge) == (
        None,
        None,
        (),
        None,
    )
    assert (state.compaction_version, state.erased_at, state.listed) == (2, FENCE, True)
    fresh = store.unfolded_turns(KEY, None, 10, erased_at=FENCE)
    assert [s.turn.position for s in fresh] == [again(0).position, again(1).position]
    page = store.turns_page(KEY, None, 10)
    assert [s.turn.position for s in page.turns] == [again(0).position, again(1).position]
    assert (page.last, page.stored) == (None, True)


def test_the_deletion_leaves_nothing_but_the_erased_state(store):
    other = ConversationKey("acme", "c2")
    record(store, turn(0), 0, key=other)
    build_a_conversation(store)
    fence = store.fence_off(KEY, FENCE)
    assert store.delete_fenced(KEY, fence, max_items=100) == Deleted(10, complete=True)
    assert stored_keys(store) == [STATE_SK]
    assert store.state(KEY) == ERASED
    assert (store.recorded(KEY, "t000"), store.fold_at(KEY, 1)) == (None, None)
    assert store.unfolded_turns(KEY, None, 10) == []
    # Deleting again finds nothing; the other contact is untouched.
    assert store.delete_fenced(KEY, fence, max_items=100) == Deleted(0, complete=True)
    assert len(stored_keys(store, other)) == 3


def test_a_deletion_out_of_budget_says_so_and_the_next_one_finishes(store):
    build_a_conversation(store)
    fence = store.fence_off(KEY, FENCE)
    first = store.delete_fenced(KEY, fence, max_items=2)
    # At least the budget (DynamoDB finishes the page of keys it read), and not complete.
    assert first.items >= 2
    assert not first.complete
    rest = store.delete_fenced(KEY, fence, max_items=100)
    assert (first.items + rest.items, rest.complete) == (10, True)
    assert stored_keys(store) == [STATE_SK]


def test_a_deletion_whose_budget_is_just_what_the_fence_covers_is_complete(store):
    build_a_conversation(store)
    fence = store.fence_off(KEY, FENCE)
    assert store.delete_fenced(KEY, fence, max_items=10) == Deleted(10, complete=True)


def test_a_marker_put_again_after_the_fence_survives_the_deletion(store):
    record(store, turn(0), 0)
    record(store, turn(1), 1)
    fence = store.fence_off(KEY, FENCE)
    record(store, again(0), 3, erased_at=FENCE)
    # The two old turns and the old marker of t001; t000's marker is the new message's.
    assert store.delete_fenced(KEY, fence, max_items=100) == Deleted(3, complete=True)
    new_turn = turn_sort_key(again(0).position)
    assert stored_keys(store) == sorted([STATE_SK, marker_sort_key("t000"), new_turn])
    assert store.recorded(KEY, "t000").position == again(0).position
    assert snapshot_of(store, LATER)[1] == ["t000"]
    with pytest.raises(Duplicate):
        record(store, again(0), 4, erased_at=FENCE)  # recorded after the fence: a duplicate


def test_erasing_nothing_writes_nothing_and_erasing_again_keeps_the_fence(store):
    assert store.fence_off(KEY, FENCE) is None
    assert store.state(KEY) is None
    assert stored_keys(store) == []
    record(store, turn(0), 0)
    first = store.fence_off(KEY, FENCE)
    assert first == Fence(FENCE, 1, state_erased=True)
    erased = ConversationState(version=2, compaction_version=1, erased_at=FENCE)
    assert store.state(KEY) == erased
    # Again (a retried request, or the asynchronous rest): the same fence, nothing written.
    assert store.fence_off(KEY, FENCE + timedelta(hours=1)) == Fence(FENCE, 1, state_erased=False)
    assert store.state(KEY) == erased
    store.delete_fenced(KEY, first, max_items=100)
    assert store.fence_off(KEY, FENCE + timedelta(hours=1)) == Fence(FENCE, 1, state_erased=False)
    assert stored_keys(store) == [STATE_SK]
    # A conversation since: the next erase is a new fence over it.
    record(store, again(0), 2, erased_at=FENCE)
    later = FENCE + timedelta(hours=2)
    assert store.fence_off(KEY, later) == Fence(later, 2, state_erased=True)
    assert store.state(KEY) == ConversationState(version=4, compaction_version=2, erased_at=later)
    # A conversation of replies only (no version yet) is erased too.
    replies = ConversationKey("acme", "replies")
    store.record_reply(replies, turn(0, "assistant"), 3, lifetime_days=30)
    assert store.fence_off(replies, FENCE) == Fence(FENCE, 1, state_erased=True)
    assert store.state(replies) == ConversationState(
        version=1, compaction_version=1, erased_at=FENCE
    )


def test_a_compaction_that_read_before_the_erase_writes_nothing_back(store):
    for n in range(3):
        store.record_reply(KEY, turn(n, "assistant"), 5, lifetime_days=30)
    read = store.state(KEY)
    unfolded = store.unfolded_turns(KEY, read.watermark, 10, erased_at=read.erased_at)
    through = unfolded[-1].turn.position
    assert store.claim(KEY, through, expected_version=0, expected_recorded=3)
    assert store.fence_off(KEY, FENCE) == Fence(FENCE, 1, state_erased=True)
    fold = next_fold(None, [s.turn for s in unfolded], "erased words", version=1)
    assert not commit(store, fold, through, read.compaction_version, tokens=15, turns=3)
    assert not commit(store, None, through, read.compaction_version, tokens=15, turns=3)
    assert not store.claim(KEY, through, expected_version=0, expected_recorded=3)
    assert store.fold_at(KEY, 1) is None
    assert store.state(KEY) == ConversationState(version=1, compaction_version=1, erased_at=FENCE)
    # The old claim went with the erase: a reply since is not late.
    store.record_reply(KEY, again(0, "assistant"), 5, lifetime_days=30, erased_at=FENCE)
    assert store.state(KEY).late_turns == ()


def test_clearing_a_lease_read_before_the_erase_leaves_the_new_conversations(store):
    record(store, turn(0), 0, lease=NOW + timedelta(minutes=15))
    read = store.state(KEY)  # the compactor's read: one turn recorded, compaction version 0
    store.fence_off(KEY, FENCE)
    lease = FENCE + timedelta(minutes=30)
    record(store, again(0), 2, lease=lease, erased_at=FENCE)  # one turn recorded again
    store.clear_lease(
        KEY, expected_recorded=read.turns_recorded, expected_version=read.compaction_version
    )
    state = store.state(KEY)
    assert (state.lease_until, state.turns_recorded, state.unfolded_turns) == (lease, 1, 1)
    assert state.unfolded_tokens == 2
    # The new conversation's own compaction does clear it.
    store.clear_lease(KEY, expected_recorded=1, expected_version=1)
    state = store.state(KEY)
    assert (state.lease_until, state.unfolded_turns, state.unfolded_tokens) == (None, 0, 0)


@pytest.mark.parametrize("arrival", [timedelta(minutes=-1), timedelta(0)])
def test_a_reply_that_arrived_by_the_fence_is_refused_with_it(store, arrival):
    record(store, turn(0), 0)
    store.fence_off(KEY, FENCE)
    erased = store.state(KEY)
    reply = Turn(
        "r", "assistant", [{"text": "in flight"}], NOW - timedelta(minutes=5), FENCE + arrival
    )
    for fence_read in (None, FENCE):
        with pytest.raises(ErasedSince) as refused:
            store.record_reply(KEY, reply, 3, lifetime_days=30, erased_at=fence_read)
        assert refused.value.erased_at == FENCE
    assert store.recorded(KEY, "r") is None
    assert store.state(KEY) == erased
    assert turn_sort_key(reply.position) not in stored_keys(store)
    # Arrived after the fence but stamped before it (a late reply): still the erased past.
    arrived_after = Turn("r", "assistant", reply.content, reply.sent_at, FENCE + timedelta(1))
    with pytest.raises(ErasedSince):
        store.record_reply(KEY, arrived_after, 3, lifetime_days=30, erased_at=FENCE)
    # Placed after the fence, it is recorded, and lists the conversation again.
    stamped = placed_after(reply, FENCE, FENCE)
    assert stamped.sent_at == FENCE + timedelta(microseconds=1)
    store.record_reply(KEY, stamped, 3, lifetime_days=30, erased_at=FENCE)
    page = store.turns_page(KEY, None, 10)
    assert [s.turn.position for s in page.turns] == [stamped.position]
    assert store.state(KEY).listed


def test_the_export_pages_oldest_first_looking_one_ahead(store):
    assert store.turns_page(KEY, None, 3) == TurnsPage([], None, stored=False)
    usage = TokenUsage(12, 7, cache_read_input_tokens=3)
    record(store, turn(0), 0)
    store.record_reply(KEY, turn(1, "assistant"), 3, lifetime_days=30, usage=usage)
    record(store, turn(2), 1)
    exact = store.turns_page(KEY, None, 3)
    assert (ids(exact.turns), exact.last, exact.stored) == (["t000", "t001", "t002"], None, True)
    assert [s.usage for s in exact.turns] == [None, usage, None]
    assert [s.turn.content for s in exact.turns] == [[{"text": f"turn {n}"}] for n in range(3)]
    first = store.turns_page(KEY, None, 2)
    assert (ids(first.turns), first.last) == (["t000", "t001"], turn(1).position)
    second = store.turns_page(KEY, first.last, 2)
    assert (ids(second.turns), second.last, second.stored) == (["t002"], None, True)
    single = store.turns_page(KEY, turn(1).position, 1)
    assert (ids(single.turns), single.last) == (["t002"], None)
    assert store.turns_page(KEY, turn(2).position, 5) == TurnsPage([], None, stored=True)


def test_the_export_skips_expired_and_erased_turns(store):
    old = Turn("old", "assistant", [{"text": "old"}], NOW - timedelta(days=29))
    store.record_reply(KEY, old, 1, lifetime_days=30)
    record(store, turn(0), 0)
    record(store, turn(1), 1)
    CLOCK_SHIFT[0] = timedelta(days=2).total_seconds()  # the old reply's TTL has passed
    first = store.turns_page(KEY, None, 1)
    assert (ids(first.turns), first.last) == (["t000"], turn(0).position)
    whole = store.turns_page(KEY, None, 2)
    assert (ids(whole.turns), whole.last) == (["t000", "t001"], None)
    store.fence_off(KEY, FENCE)
    assert store.turns_page(KEY, None, 2) == TurnsPage([], None, stored=False)
    record(store, again(5), 3, erased_at=FENCE)
    page = store.turns_page(KEY, None, 1)
    assert (ids(page.turns), page.last, page.stored) == (["t005"], None, True)


CONTACTS = ["c0", "c1", "c2", "c3", "c4", "c11", "c20"]
"""Spread over shards, three of them in one shard (where "c11" sorts before "c2")."""


def test_contacts_are_listed_shard_by_shard_in_pages_looking_one_ahead(store):
    shards = [shard_of(contact) for contact in CONTACTS]
    assert len(set(shards)) >= 4
    assert max(shards.count(shard) for shard in shards) >= 3
    for n, contact in enumerate(CONTACTS):
        record(store, turn(n), 0, listed=True, key=ConversationKey("acme", contact))
        record(store, turn(n + 10), 1, key=ConversationKey("acme", contact))
    record(store, turn(9), 0, key=ConversationKey("acme", "unlisted"))
    record(store, turn(9), 0, listed=True, key=ConversationKey("other", "c5"))
    expected = sorted(CONTACTS, key=lambda contact: (shard_of(contact), contact))
    whole = store.contacts_page("acme", None, len(CONTACTS))
    assert whole.contacts == [
        ContactEntry(contact, turn(CONTACTS.index(contact) + 10).sent_at) for contact in expected
    ]
    assert whole.last is None
    for limit in (1, 2, 3, 6, 7, 8):
        listed: list[str] = []
        after = None
        pages = 0
        while True:
            page = store.contacts_page("acme", after, limit)
            pages += 1
            listed += [entry.contact_id for entry in page.contacts]
            if page.last is None:
                break
            assert len(page.contacts) == limit
            assert page.last == ContactsPosition(shard_of(listed[-1]), listed[-1])
            after = page.last
        assert listed == expected
        assert pages == -(-len(CONTACTS) // limit)
    assert store.contacts_page("nobody", None, 5).contacts == []
    assert store.contacts_page("nobody", None, 5).last is None


def test_a_reply_only_conversation_is_listed_and_an_erased_one_is_not(store):
    replies = ConversationKey("acme", "r")
    store.record_reply(replies, turn(0, "assistant"), 3, lifetime_days=30)
    record(store, turn(1), 0)
    assert (store.state(replies).listed, store.state(KEY).listed) == (True, False)
    record(store, turn(2), 1, listed=True)

    def listing() -> dict[str, datetime | None]:
        page = store.contacts_page("acme", None, 10)
        return {entry.contact_id: entry.last_message_at for entry in page.contacts}

    assert listing() == {"r": None, "c1": turn(2).sent_at}
    store.fence_off(KEY, FENCE)
    assert listing() == {"r": None}
    # The next conversation lists it again: the erased state is not listed.
    assert not store.state(KEY).listed
    record(store, again(0), 3, erased_at=FENCE, listed=True)
    assert listing() == {"r": None, "c1": again(0).sent_at}
    store.fence_off(replies, FENCE)
    store.record_reply(replies, again(1, "assistant"), 3, lifetime_days=30, erased_at=FENCE)
    assert listing() == {"r": None, "c1": again(0).sent_at}
