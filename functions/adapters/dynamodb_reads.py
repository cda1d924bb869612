"""The conversation store's reads: the state and newest turns, unfolded turns, markers, folds.

Every read is consistent: a converse call commits on what it read, under a
condition on the version it saw. Turns past their TTL are left out of what a
window reads (DynamoDB deletes them lazily, days late), and marked for the compactor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from adapters.conversation_store import (
    ConversationKey,
    RecordedTurn,
    Snapshot,
    StoredTurn,
    format_instant,
)
from adapters.dynamodb_items import (
    MEMORY_SK,
    STATE_SK,
    TTL_ATTRIBUTE,
    TURN_PREFIX,
    TURNS_END,
    Item,
    erased_through,
    fold_from,
    fold_sort_key,
    item_key,
    marker_from,
    marker_sort_key,
    state_from,
    stored_from,
    turn_from,
    turn_sort_key,
)
from adapters.dynamodb_table import DynamoDBTable
from memory_core.conversation import NEW_CONVERSATION, ConversationState, Fold
from memory_core.erasure import erased, memory_erased
from memory_core.history_range import is_expired
from memory_core.turns import Turn, TurnPosition

BATCH_GET_LIMIT = 100
"""Keys per BatchGetItem request, DynamoDB's limit."""


class DynamoDBReads(DynamoDBTable):
    def snapshot(
        self, key: ConversationKey, since: datetime, before: TurnPosition, page_size: int
    ) -> Snapshot:
        """The state, and the turns sent from `since` and older than `before`, newest first.

        The first page comes back with the state; later pages are fetched only
        if the reader asks for them (the window usually stops within the first).
        """
        # One more item a page: the memory's, between the state and the turns.
        pages = self._query_pages(key, since, page_size + 1)
        first = next(pages)
        state = NEW_CONVERSATION
        items = first
        if items and items[0]["SK"]["S"] == STATE_SK:
            state_item, items = items[0], items[1:]
            memory = None
            if items and items[0]["SK"]["S"] == MEMORY_SK:
                memory, items = items[0], items[1:]
            state = self._live_state(state_item, memory)
        return Snapshot(state, self._turns(items, pages, before, state.erased_at))

    def _live_state(
        self, item: Mapping[str, Any], memory: Mapping[str, Any] | None = None
    ) -> ConversationState:
        """The state with its memory, or a fresh one where its TTL passed (the version is
        kept for the lock). A memory past its TTL or from before the latest erase (which
        deletes it behind the fence) is none."""
        state = self._with_memory(state_from(item), memory)
        ttl = item.get(TTL_ATTRIBUTE)
        if ttl and is_expired(int(ttl["N"]), self._now()):
            # The lock and the compaction marks stay: the commit's conditions compare them.
            return ConversationState(
                version=state.version,
                watermark=state.watermark,
                folding_through=state.folding_through,
                late_turns=state.late_turns,
                compaction_version=state.compaction_version,
                erased_at=state.erased_at,
                listed=state.listed,
            )
        return state

    def state(self, key: ConversationKey) -> ConversationState | None:
        """The state and its memory: both items in one Query, as a converse reads them."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="PK = :pk AND SK BETWEEN :memory AND :state",
            ExpressionAttributeValues={
                ":pk": {"S": key.partition},
                ":memory": {"S": MEMORY_SK},
                ":state": {"S": STATE_SK},
            },
            ConsistentRead=True,
        )
        by_key = {item["SK"]["S"]: item for item in response.get("Items", [])}
        item = by_key.get(STATE_SK)
        if item is None:
            return None
        return self._with_memory(state_from(item), by_key.get(MEMORY_SK))

    def _with_memory(
        self, state: ConversationState, memory: Mapping[str, Any] | None
    ) -> ConversationState:
        """The state with the memory item read beside it. Without one, the state as it was
        read: a state written before the memory had an item carries its own, until its
        next fold. A memory item past its TTL (DynamoDB deletes lazily) or written before
        the latest erase (and not deleted yet) is no memory."""
        if memory is None:
            return state
        fold = fold_from(memory)
        if is_expired(int(memory[TTL_ATTRIBUTE]["N"]), self._now()) or (
            fold is not None and memory_erased(fold, state.erased_at)
        ):
            fold = None
        return replace(state, fold=fold)

    def recorded(self, key: ConversationKey, turn_id: str) -> RecordedTurn | None:
        item = self._read_item(key.partition, marker_sort_key(turn_id))
        return marker_from(item) if item else None

    def fold_at(self, key: ConversationKey, version: int) -> Fold | None:
        """The memory compaction `version` wrote, as a replay's first answer served it."""
        item = self._read_item(key.partition, fold_sort_key(version))
        if not item or is_expired(int(item[TTL_ATTRIBUTE]["N"]), self._now()):
            return None
        return fold_from(item)

    def _query_pages(
        self, key: ConversationKey, since: datetime, page_size: int
    ) -> Iterator[list[Item]]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :oldest AND :state",
            "ExpressionAttributeValues": {
                ":pk": {"S": key.partition},
                ":oldest": {"S": TURN_PREFIX + format_instant(since)},
                ":state": {"S": STATE_SK},
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": page_size,
        }
        while True:
            response = self._client.query(**request)
            yield response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def _turns(
        self,
        first_page: list[Item],
        later_pages: Iterator[list[Item]],
        before: TurnPosition,
        erased_at: datetime | None,
    ) -> Iterator[Turn]:
        now = self._now()
        boundary = turn_sort_key(before)
        page: list[Item] | None = first_page
        while page is not None:
            for item in page:
                if item["SK"]["S"] >= boundary:
                    continue  # recorded after the current message, or the message itself
                if is_expired(int(item[TTL_ATTRIBUTE]["N"]), now):
                    continue  # past its TTL; DynamoDB deletes lazily, days late
                turn = turn_from(item)
                if erased(turn.position, erased_at):
                    return  # the erased conversation: every older turn is its too
                yield turn
            page = next(later_pages, None)

    def unfolded_turns(
        self,
        key: ConversationKey,
        after: TurnPosition | None,
        limit: int,
        *,
        erased_at: datetime | None = None,
    ) -> list[StoredTurn]:
        """The turns newer than the watermark, oldest first, at most `limit`.

        The read starts at the watermark, so its cost follows what is unfolded,
        never the conversation's length. Turns past their TTL come back marked
        `expired`: the compactor passes over them but moves the counters and
        the watermark past them. Turns an erase fenced off (`erased_at`) are not
        read: they were never counted in the conversation's counters.
        """
        start = max(
            turn_sort_key(after) if after else TURN_PREFIX,
            erased_through(erased_at) if erased_at else "",
        )
        request: dict[str, Any] = {
            "TableName": self._table,
            # Up to the last turn: the state item, which sorts after, is not read (or billed).
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :start AND :turns_end",
            "ExpressionAttributeValues": {
                ":pk": {"S": key.partition},
                ":start": {"S": start},
                ":turns_end": {"S": TURNS_END},
            },
            "ScanIndexForward": True,
            "ConsistentRead": True,
            "Limit": limit + 1,  # BETWEEN includes the watermark's own turn
        }
        now = self._now()
        found: list[StoredTurn] = []
        while len(found) < limit:
            response = self._client.query(**request)
            for item in response.get("Items", []):
                if item["SK"]["S"] == start or len(found) == limit:
                    continue
                found.append(stored_from(item, now))
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found

    def turns_at(self, key: ConversationKey, positions: Sequence[TurnPosition]) -> list[StoredTurn]:
        """The turns at these positions (the late list), oldest first; deleted ones are absent."""
        now = self._now()
        found: list[StoredTurn] = []
        keys = [item_key(key.partition, turn_sort_key(p)) for p in sorted(set(positions))]
        for start in range(0, len(keys), BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                self._table: {"Keys": keys[start : start + BATCH_GET_LIMIT], "ConsistentRead": True}
            }
            while request:
                response = self._client.batch_get_item(RequestItems=request)
                found += [
                    stored_from(i, now) for i in response.get("Responses", {}).get(self._table, [])
                ]
                request = response.get("UnprocessedKeys") or {}
        return sorted(found, key=lambda stored: stored.turn.position)
