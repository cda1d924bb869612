"""Erasing a contact: the fence first, then every item recorded before it, in pages.

The fence is the state replaced by what an erase leaves (`erased_state_item`),
under a condition on the three counters any writer moves (the converse
version, the turns recorded, the compaction version): a write that lands
between the read and the fence sends the erase round again, so no compaction
can commit onto the fence with a version it read before. From then on reads
pass over everything recorded at or before the fence (`memory_core.erasure`),
and deleting it can take as long as it takes.

The deletion reads the partition's keys in pages and deletes what the fence
covers: turns that arrived at or before it, memories kept under an older
compaction version, recall index segments of older compactions only,
message-id markers recorded before it. A marker is the
one item a later write can put again under the same key (an old id sent
again is a new message), so markers are deleted under a condition on their
arrival, in transactions; turns and memories in unconditional batches, whose
unprocessed items are retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from adapters.conversation_store import ConversationKey, Deleted, Fence, format_instant
from adapters.dynamodb_items import (
    FOLD_PREFIX,
    MARKER_PREFIX,
    MEMORY_SK,
    MEMORY_VERSION_ATTRIBUTE,
    RECORDED_AT,
    STATE_SK,
    TURN_PREFIX,
    Item,
    erased_state_item,
    fold_version_of,
    item_key,
    position_of,
    state_from,
)
from adapters.dynamodb_recall_index import RECALL_PREFIX, last_version_of
from adapters.dynamodb_table import DynamoDBTable
from memory_core.erasure import erased
from memory_core.history_range import expires_at

BATCH_WRITE_LIMIT = 25
"""Requests per BatchWriteItem, DynamoDB's limit."""
TRANSACTION_LIMIT = 100
"""Items per TransactWriteItems, DynamoDB's limit."""
KEYS_PER_PAGE = 1000
FENCE_ATTEMPTS = 20
UNPROCESSED_ATTEMPTS = 8
BACKOFF_SECONDS = 0.05


class DynamoDBErasure(DynamoDBTable):
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    def fence_off(self, key: ConversationKey, erased_at: datetime) -> Fence | None:
        """The fence of an erase at `erased_at`; None when nothing at all is stored.

        A state an erase already left empty keeps its fence: erasing again changes
        nothing, but the deletion of what that fence covers is carried on.
        """
        for _ in range(FENCE_ATTEMPTS):
            item = self._read_item(key.partition, STATE_SK)
            state = state_from(item) if item else None
            if state is not None and state.holds_nothing:
                assert state.erased_at is not None
                return Fence(state.erased_at, state.compaction_version, state_erased=False)
            if state is None and not self._holds_anything(key):
                return None
            version = state.version if state else 0
            compaction = state.compaction_version if state else 0
            recorded = state.turns_recorded if state else 0
            fence = erased_state_item(
                key.partition,
                erased_at,
                version=version + 1,
                compaction_version=compaction + 1,
                # As long as anything written before it can be in flight: a turn's lifetime.
                ttl=expires_at(erased_at, 2 * self._retention_days),
            )
            if self._put_if_unchanged(fence, item, version, recorded, compaction):
                return Fence(erased_at, compaction + 1, state_erased=state is not None)
        raise ConversationBusyErasing(key)

    def _holds_anything(self, key: ConversationKey) -> bool:
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": key.partition}},
            ProjectionExpression="SK",
            ConsistentRead=True,
            Limit=1,
        )
        return bool(response.get("Items"))

    def _put_if_unchanged(
        self, fence: Item, before: Item | None, version: int, recorded: int, compaction: int
    ) -> bool:
        values: dict[str, Any] = {}
        if before is None:
            condition = "attribute_not_exists(SK)"
        else:
            clauses = []
            for name, value in (
                ("version", version),
                ("turnsRecorded", recorded),
                ("foldVersion", compaction),
            ):
                if value == 0:
                    clauses.append(f"attribute_not_exists({name})")
                else:
                    clauses.append(f"{name} = :{name}")
                    values[f":{name}"] = {"N": str(value)}
            condition = " AND ".join(clauses)
        request: dict[str, Any] = {**self._put(fence), "ConditionExpression": condition}
        if values:
            request["ExpressionAttributeValues"] = values
        try:
            self._client.put_item(**request)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def delete_fenced(self, key: ConversationKey, fence: Fence, *, max_items: int) -> Deleted:
        """Delete up to `max_items` of the items the fence covers; `complete` when none is left."""
        deleted = 0
        for page, more in self._key_pages(key):
            covered = [item["SK"]["S"] for item in page if _covered(item, fence)]
            room = max_items - deleted
            if len(covered) > room:
                deleted += self._delete(key, covered[:room], fence)
                return Deleted(deleted, complete=False)
            deleted += self._delete(key, covered, fence)
            if deleted >= max_items and more:
                return Deleted(deleted, complete=False)
        return Deleted(deleted, complete=True)

    def _delete(self, key: ConversationKey, sort_keys: list[str], fence: Fence) -> int:
        markers = [item_key(key.partition, k) for k in sort_keys if k.startswith(MARKER_PREFIX)]
        others = [
            item_key(key.partition, k)
            for k in sort_keys
            if not k.startswith(MARKER_PREFIX) and k != MEMORY_SK
        ]
        memory = MEMORY_SK in sort_keys and self._delete_memory(key, fence)
        return (
            self._delete_batches(others)
            + self._delete_markers(markers, fence.erased_at)
            + int(memory)
        )

    def _delete_memory(self, key: ConversationKey, fence: Fence) -> bool:
        """The memory served before the fence; a compaction after the erase may have put a
        new one meanwhile, which stays (the condition is the one `_covered` read)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=item_key(key.partition, MEMORY_SK),
                ConditionExpression=f"{MEMORY_VERSION_ATTRIBUTE} < :below",
                ExpressionAttributeValues={":below": {"N": str(fence.folds_below)}},
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _key_pages(self, key: ConversationKey) -> Iterator[tuple[list[Item], bool]]:
        """The partition's keys (and each marker's arrival), a page at a time, each with
        whether another page follows."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": key.partition}},
            "ProjectionExpression": "#sk, #recorded, #version",
            "ExpressionAttributeNames": {
                "#sk": "SK",
                "#recorded": RECORDED_AT,
                "#version": MEMORY_VERSION_ATTRIBUTE,
            },
            "ConsistentRead": True,
            "Limit": KEYS_PER_PAGE,
        }
        while True:
            response = self._client.query(**request)
            last = response.get("LastEvaluatedKey")
            yield response.get("Items", []), last is not None
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def _delete_batches(self, keys: list[Item]) -> int:
        for start in range(0, len(keys), BATCH_WRITE_LIMIT):
            pending: dict[str, Any] = {
                self._table: [
                    {"DeleteRequest": {"Key": k}} for k in keys[start : start + BATCH_WRITE_LIMIT]
                ]
            }
            for attempt in range(UNPROCESSED_ATTEMPTS):
                pending = self._client.batch_write_item(RequestItems=pending).get(
                    "UnprocessedItems", {}
                )
                if not pending:
                    break
                # Throttled: DynamoDB hands back what it did not delete; wait, then again.
                self.sleep(BACKOFF_SECONDS * 2**attempt)
            else:
                raise UnprocessedDeletes(sum(len(requests) for requests in pending.values()))
        return len(keys)

    def _delete_markers(self, keys: list[Item], erased_at: datetime) -> int:
        """Markers recorded before the fence: one put again since (the id sent anew) stays."""
        condition = _recorded_by_fence(erased_at)
        deleted = 0
        for start in range(0, len(keys), TRANSACTION_LIMIT):
            chunk = keys[start : start + TRANSACTION_LIMIT]
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {"Delete": {"TableName": self._table, "Key": k, **condition}} for k in chunk
                    ]
                )
                deleted += len(chunk)
            except ClientError as error:
                if error.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
                # One of them was put again (or the chunk collided with a writer): one by one.
                deleted += sum(self._delete_marker(k, condition) for k in chunk)
        return deleted

    def _delete_marker(self, marker_key: Item, condition: dict[str, Any]) -> bool:
        try:
            self._client.delete_item(TableName=self._table, Key=marker_key, **condition)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _covered(item: Mapping[str, Any], fence: Fence) -> bool:
    """The item was recorded before the fence: a turn that arrived at or before it, a
    memory (served or kept) of an older compaction version, a recall index segment of
    older compactions only, a marker recorded before it."""
    sort_key = item["SK"]["S"]
    if sort_key == MEMORY_SK:
        return int(item.get(MEMORY_VERSION_ATTRIBUTE, {"N": "0"})["N"]) < fence.folds_below
    if sort_key.startswith(TURN_PREFIX) and sort_key != STATE_SK:
        return erased(position_of(sort_key), fence.erased_at)
    if sort_key.startswith(FOLD_PREFIX):
        return fold_version_of(sort_key) < fence.folds_below
    if sort_key.startswith(RECALL_PREFIX):
        return last_version_of(sort_key) < fence.folds_below
    return sort_key.startswith(MARKER_PREFIX) and _marker_fenced(item, fence)


def _marker_fenced(item: Mapping[str, Any], fence: Fence) -> bool:
    recorded = item.get(RECORDED_AT)
    # A marker from before markers kept their arrival predates every fence.
    return recorded is None or recorded["S"] <= format_instant(fence.erased_at)


def _recorded_by_fence(erased_at: datetime) -> dict[str, Any]:
    """The condition of a marker's delete: recorded at or before the fence."""
    return {
        "ConditionExpression": f"attribute_not_exists({RECORDED_AT}) OR {RECORDED_AT} <= :fence",
        "ExpressionAttributeValues": {":fence": {"S": format_instant(erased_at)}},
    }


class ConversationBusyErasing(Exception):
    """Writers kept changing the state between the erase's read and its fence."""

    def __init__(self, key: ConversationKey) -> None:
        super().__init__(f"{key.partition}: the state kept changing; erase again")


class UnprocessedDeletes(Exception):
    def __init__(self, count: int) -> None:
        super().__init__(f"{count} deletes stayed unprocessed after retries")
        self.count = count
