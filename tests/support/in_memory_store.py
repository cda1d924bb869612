"""An in-memory conversation store with the DynamoDB store's contract.

For simulations of hundreds or thousands of turns: the emulator copies the
whole table on every transaction, which makes a long conversation quadratic.
`tests/integration/test_store_contract.py` runs the same scenarios against
both stores, so this one cannot drift from the real one unnoticed.

It also keeps the data routes' part (`ConversationData`): the export, the
contacts listing (in the contacts index's order: the shard, then the contact
id) and the erase (the fence, then the deletion of what it covers).
"""

from __future__ import annotations

import bisect
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from adapters.conversation_store import (
    ContactEntry,
    ContactsPage,
    ContactsPosition,
    ConversationData,
    ConversationKey,
    ConversationStore,
    Deleted,
    Duplicate,
    ErasedSince,
    Fence,
    RecordedTurn,
    Snapshot,
    StateChange,
    StoredTurn,
    TurnsPage,
    VersionConflict,
    check_item_size,
    content_digest,
    encode_content,
)
from adapters.dynamodb_items import (
    MEMORY_SK,
    STATE_SK,
    fold_sort_key,
    marker_sort_key,
    shard_of,
    turn_sort_key,
)
from memory_core.conversation import NEW_CONVERSATION, ConversationState, Fold, LateTurn
from memory_core.erasure import erased, marker_erased
from memory_core.history_range import expires_at, is_expired
from memory_core.turns import Turn, TurnPosition
from memory_core.usage import TokenUsage


@dataclass
class _Conversation:
    positions: list[TurnPosition] = field(default_factory=list)
    turns: dict[TurnPosition, StoredTurn] = field(default_factory=dict)
    expiry: dict[TurnPosition, int] = field(default_factory=dict)
    markers: dict[str, RecordedTurn] = field(default_factory=dict)
    state: ConversationState | None = None
    state_expiry: int | None = None
    folds: dict[int, tuple[Fold, int]] = field(default_factory=dict)
    """Each memory a compaction wrote, by version, with its expiry."""
    served: int | None = None
    """The version of the memory now served, which DynamoDB keeps as an item of its own
    (`TURN#~MEMORY`) until an erase deletes it."""

    def holds_anything(self) -> bool:
        return bool(self.state or self.turns or self.markers or self.folds or self.served)

    def drop_served(self) -> None:
        self.served = None

    def remove_turn(self, position: TurnPosition) -> None:
        index = bisect.bisect_left(self.positions, position)
        del self.positions[index]
        del self.turns[position]
        del self.expiry[position]


class InMemoryConversationStore:
    def __init__(self, turn_retention_days: int, clock: Callable[[], float] = time.time) -> None:
        self._retention_days = turn_retention_days
        self._clock = clock
        self._conversations: dict[ConversationKey, _Conversation] = {}
        self._lock = threading.Lock()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _conversation(self, key: ConversationKey) -> _Conversation:
        return self._conversations.setdefault(key, _Conversation())

    # -- reads ---------------------------------------------------------------------

    def snapshot(
        self, key: ConversationKey, since: datetime, before: TurnPosition, page_size: int
    ) -> Snapshot:
        conversation = self._conversation(key)
        state = conversation.state or NEW_CONVERSATION
        expiry = conversation.state_expiry
        if conversation.state and expiry is not None and is_expired(expiry, self._now()):
            state = ConversationState(
                version=state.version,
                watermark=state.watermark,
                folding_through=state.folding_through,
                late_turns=state.late_turns,
                compaction_version=state.compaction_version,
                erased_at=state.erased_at,
                listed=state.listed,
            )
        return Snapshot(state, self._newest_first(conversation, since, before, state.erased_at))

    def _newest_first(
        self,
        conversation: _Conversation,
        since: datetime,
        before: TurnPosition,
        erased_at: datetime | None,
    ) -> Iterator[Turn]:
        now = self._now()
        end = bisect.bisect_left(conversation.positions, before)
        for index in range(end - 1, -1, -1):
            position = conversation.positions[index]
            if position.sent_at < since:
                return
            if is_expired(conversation.expiry[position], now):
                continue
            if not erased(position, erased_at):
                yield conversation.turns[position].turn

    def state(self, key: ConversationKey) -> ConversationState | None:
        return self._conversation(key).state

    def recorded(self, key: ConversationKey, turn_id: str) -> RecordedTurn | None:
        return self._conversation(key).markers.get(turn_id)

    def fold_at(self, key: ConversationKey, version: int) -> Fold | None:
        kept = self._conversation(key).folds.get(version)
        if kept is None or is_expired(kept[1], self._now()):
            return None
        return kept[0]

    def unfolded_turns(
        self,
        key: ConversationKey,
        after: TurnPosition | None,
        limit: int,
        *,
        erased_at: datetime | None = None,
    ) -> list[StoredTurn]:
        conversation = self._conversation(key)
        now = self._now()
        start = bisect.bisect_right(conversation.positions, after) if after else 0
        found: list[StoredTurn] = []
        for position in conversation.positions[start:]:
            if len(found) == limit:
                break
            if erased(position, erased_at):
                continue
            stored = conversation.turns[position]
            found.append(replace(stored, expired=is_expired(conversation.expiry[position], now)))
        return found

    def turns_at(self, key: ConversationKey, positions: Sequence[TurnPosition]) -> list[StoredTurn]:
        conversation = self._conversation(key)
        now = self._now()
        found: list[StoredTurn] = []
        for position in sorted(set(positions)):
            stored = conversation.turns.get(position)
            if stored is not None:
                expired = is_expired(conversation.expiry[position], now)
                found.append(replace(stored, expired=expired))
        return found

    # -- writes --------------------------------------------------------------------

    def record_contact_turn(
        self,
        key: ConversationKey,
        turn: Turn,
        *,
        tokens: int,
        change: StateChange,
        turn_count: int,
        decision: str,
        dropped: int | None,
        memory_version: int,
        lifetime_days: int,
        window_from: TurnPosition | None = None,
    ) -> None:
        check_item_size(encode_content(turn))
        with self._lock:
            conversation = self._conversation(key)
            self._refuse_duplicate(conversation, turn, change.erased_at)
            current = conversation.state or NEW_CONVERSATION
            if current.version != change.expected_version:
                raise VersionConflict()
            if not change.late and current.is_late(turn.position):
                raise VersionConflict()  # as DynamoDB's condition on the marks would
            self._add(
                conversation,
                turn,
                tokens=tokens,
                turn_count=turn_count,
                decision=decision,
                dropped=dropped,
                memory_version=memory_version,
                lifetime_days=lifetime_days,
                window_from=window_from,
            )
            conversation.state = replace(
                _counted(current, turn, tokens, late=change.late),
                version=change.expected_version + 1,
                streak=replace(
                    change.streak, last_contact_at=change.streak.last_contact_at or turn.sent_at
                ),
                recent_contact=change.recent_contact,
                lease_until=_whole_second(change.lease_until) or current.lease_until,
                stable_edge=change.stable_edge,
                last_window_at=change.window_at or current.last_window_at,
                listed=current.listed or change.list_contact,
            )
            conversation.state_expiry = self._state_ttl(turn, lifetime_days)

    def record_reply(
        self,
        key: ConversationKey,
        turn: Turn,
        tokens: int,
        *,
        lifetime_days: int,
        usage: TokenUsage | None = None,
        erased_at: datetime | None = None,
    ) -> None:
        check_item_size(encode_content(turn))
        with self._lock:
            conversation = self._conversation(key)
            self._refuse_duplicate(conversation, turn, erased_at)
            current = conversation.state or NEW_CONVERSATION
            if erased(turn.position, current.erased_at):
                assert current.erased_at is not None
                raise ErasedSince(current.erased_at)
            self._add(
                conversation,
                turn,
                tokens=tokens,
                turn_count=None,
                decision=None,
                dropped=None,
                memory_version=None,
                lifetime_days=lifetime_days,
                usage=usage,
            )
            late = current.is_late(turn.position)
            # A reply reads nothing first: it lists a conversation only if nothing has.
            conversation.state = replace(_counted(current, turn, tokens, late=late), listed=True)
            conversation.state_expiry = self._state_ttl(turn, lifetime_days)

    def release_lease(self, key: ConversationKey, lease_until: datetime) -> None:
        with self._lock:
            conversation = self._conversation(key)
            state = conversation.state
            if state and state.lease_until == _whole_second(lease_until):
                conversation.state = replace(state, lease_until=None)

    def claim(
        self,
        key: ConversationKey,
        through: TurnPosition,
        *,
        expected_version: int,
        expected_recorded: int,
    ) -> bool:
        with self._lock:
            conversation = self._conversation(key)
            state = conversation.state
            if (
                state is None
                or state.compaction_version != expected_version
                or state.turns_recorded != expected_recorded
            ):
                return False
            conversation.state = replace(state, folding_through=through)
            return True

    def commit_fold(
        self,
        key: ConversationKey,
        fold: Fold | None,
        *,
        watermark: TurnPosition | None,
        late_passed: int,
        expected_version: int,
        passed_tokens: int,
        passed_turns: int,
    ) -> bool:
        with self._lock:
            conversation = self._conversation(key)
            state = conversation.state
            if state is None or state.compaction_version != expected_version:
                return False
            conversation.state = replace(
                state,
                fold=fold or state.fold,
                watermark=watermark or state.watermark,
                folding_through=None,
                late_turns=state.late_turns[late_passed:],
                compaction_version=expected_version + 1,
                unfolded_tokens=state.unfolded_tokens - passed_tokens,
                unfolded_turns=state.unfolded_turns - passed_turns,
                lease_until=None,
            )
            if fold is not None:
                kept_until = expires_at(self._now(), 2 * self._retention_days)
                conversation.folds[fold.version] = (fold, kept_until)
                conversation.served = fold.version
            return True

    def clear_lease(
        self, key: ConversationKey, *, expected_recorded: int, expected_version: int
    ) -> None:
        with self._lock:
            conversation = self._conversation(key)
            state = conversation.state
            if state is None or state.compaction_version != expected_version:
                return  # an erase moved the compaction version: the lease is not this one's
            if state.turns_recorded == expected_recorded:
                state = replace(state, unfolded_tokens=0, unfolded_turns=0)
            conversation.state = replace(state, lease_until=None)

    # -- a conversation's data: export, listing, erase ----------------------------

    def turns_page(self, key: ConversationKey, after: TurnPosition | None, limit: int) -> TurnsPage:
        conversation = self._conversations.get(key) or _Conversation()
        state = conversation.state
        fence = state.erased_at if state else None
        now = self._now()
        start = bisect.bisect_right(conversation.positions, after) if after else 0
        found: list[StoredTurn] = []
        for position in conversation.positions[start:]:
            if len(found) > limit:
                break
            if is_expired(conversation.expiry[position], now) or erased(position, fence):
                continue
            found.append(conversation.turns[position])
        more = len(found) > limit
        page = found[:limit]
        anything = bool(page) or (state is not None and not state.holds_nothing)
        return TurnsPage(page, page[-1].turn.position if more else None, anything)

    def contacts_page(
        self, tenant_id: str, after: ContactsPosition | None, limit: int
    ) -> ContactsPage:
        listed = sorted(
            (shard_of(key.contact_id), key.contact_id, conversation.state)
            for key, conversation in self._conversations.items()
            if key.tenant_id == tenant_id and conversation.state and conversation.state.listed
        )
        if after is not None:
            listed = [entry for entry in listed if entry[:2] > (after.shard, after.contact_id)]
        page = listed[:limit]
        contacts = [
            ContactEntry(contact, state.streak.last_contact_at) for _, contact, state in page
        ]
        last = ContactsPosition(*page[-1][:2]) if len(listed) > limit else None
        return ContactsPage(contacts, last)

    def fence_off(self, key: ConversationKey, erased_at: datetime) -> Fence | None:
        with self._lock:
            conversation = self._conversations.get(key)
            if conversation is None or not conversation.holds_anything():
                return None
            state = conversation.state
            if state is not None and state.holds_nothing:
                assert state.erased_at is not None
                return Fence(state.erased_at, state.compaction_version, state_erased=False)
            version = state.version if state else 0
            compaction = state.compaction_version if state else 0
            conversation.state = ConversationState(
                version=version + 1, compaction_version=compaction + 1, erased_at=erased_at
            )
            conversation.state_expiry = expires_at(erased_at, 2 * self._retention_days)
            return Fence(erased_at, compaction + 1, state_erased=state is not None)

    def delete_fenced(self, key: ConversationKey, fence: Fence, *, max_items: int) -> Deleted:
        with self._lock:
            conversation = self._conversations.get(key) or _Conversation()
            covered: list[Callable[[], object]] = [
                *(
                    functools.partial(conversation.remove_turn, position)
                    for position in list(conversation.positions)
                    if erased(position, fence.erased_at)
                ),
                *(
                    functools.partial(conversation.folds.pop, version)
                    for version in list(conversation.folds)
                    if version < fence.folds_below
                ),
                *(
                    [conversation.drop_served]
                    if conversation.served is not None and conversation.served < fence.folds_below
                    else []
                ),
                *(
                    functools.partial(conversation.markers.pop, turn_id)
                    for turn_id, marker in list(conversation.markers.items())
                    # One put again since the fence (the id sent anew) stays.
                    if marker_erased(marker.position.recorded_at, fence.erased_at)
                ),
            ]
            for delete in covered[:max_items]:
                delete()
            return Deleted(min(len(covered), max_items), complete=len(covered) <= max_items)

    def item_keys(self, key: ConversationKey) -> list[str]:
        """The sort keys the DynamoDB store would hold for the conversation, sorted."""
        conversation = self._conversations.get(key) or _Conversation()
        keys = [turn_sort_key(position) for position in conversation.positions]
        keys += [marker_sort_key(turn_id) for turn_id in conversation.markers]
        keys += [fold_sort_key(version) for version in conversation.folds]
        keys += [MEMORY_SK] if conversation.served is not None else []
        keys += [STATE_SK] if conversation.state else []
        return sorted(keys)

    def _state_ttl(self, turn: Turn, lifetime_days: int) -> int:
        return expires_at(max(turn.sent_at, self._now()), lifetime_days)

    def _refuse_duplicate(
        self, conversation: _Conversation, turn: Turn, erased_at: datetime | None
    ) -> None:
        first = conversation.markers.get(turn.id)
        # A marker recorded at or before the erase is no one's: the id is a new message.
        if first is not None and not marker_erased(first.position.recorded_at, erased_at):
            raise Duplicate(first)

    def _add(
        self,
        conversation: _Conversation,
        turn: Turn,
        *,
        tokens: int,
        turn_count: int | None,
        decision: str | None,
        dropped: int | None,
        memory_version: int | None,
        lifetime_days: int,
        usage: TokenUsage | None = None,
        window_from: TurnPosition | None = None,
    ) -> None:
        position = turn.position
        bisect.insort(conversation.positions, position)
        conversation.turns[position] = StoredTurn(turn, tokens, usage=usage)
        conversation.expiry[position] = expires_at(turn.sent_at, lifetime_days)
        conversation.markers[turn.id] = RecordedTurn(
            position=position,
            role=turn.role,
            digest=content_digest(turn.role, list(turn.content)),
            turn_count=turn_count,
            decision=decision,
            dropped=dropped,
            memory_version=memory_version,
            window_from=window_from,
        )


def _counted(state: ConversationState, turn: Turn, tokens: int, *, late: bool) -> ConversationState:
    """The counters after one more turn, and the late list if it is late (as the ADDs do)."""
    return replace(
        state,
        unfolded_tokens=state.unfolded_tokens + tokens,
        unfolded_turns=state.unfolded_turns + 1,
        turns_recorded=state.turns_recorded + 1,
        late_turns=state.late_turns + ((LateTurn(turn.position, tokens),) if late else ()),
    )


def _whole_second(instant: datetime | None) -> datetime | None:
    """The lease as DynamoDB keeps it: epoch seconds."""
    if instant is None:
        return None
    return datetime.fromtimestamp(int(instant.timestamp()), UTC)


def _implements(store: InMemoryConversationStore) -> tuple[ConversationStore, ConversationData]:
    """Both ports, checked by mypy."""
    return store, store
