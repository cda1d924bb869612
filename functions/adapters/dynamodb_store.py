"""The conversation store on one DynamoDB table: keys, items, conditions, TTL.

Single-table layout, every key prefixed by the tenant:

| item | PK | SK |
| --- | --- | --- |
| turn | `TENANT#t#CONTACT#c` | `TURN#<sentAt>#<turnId>` |
| message-id marker | same | `MSGID#<turnId>` |
| conversation state | same | `TURN#~STATE` |

The state's sort key sorts after every turn (`~` follows the digits), so one
newest-first Query reads the state and the newest turns of the history range
together: with the commit, the usual converse call is two round trips. The
low-level client is used with hand-written (de)serialisation because content
travels as one JSON string attribute: DynamoDB's own map encoding would turn
numbers inside tool inputs into Decimals and cost more to decode.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError

from adapters.conversation_store import (
    ConversationKey,
    Duplicate,
    RecordedTurn,
    Snapshot,
    StateChange,
    StoredTurn,
    VersionConflict,
    check_item_size,
    content_digest,
    encode_content,
    format_instant,
    parse_instant,
)
from memory_core.conversation import NEW_CONVERSATION, ConversationState, Fold
from memory_core.history_range import expires_at, is_expired
from memory_core.turn_cap import Streak
from memory_core.turns import Turn, TurnPosition

STATE_SK = "TURN#~STATE"
TURN_PREFIX = "TURN#"
MARKER_PREFIX = "MSGID#"
TTL_ATTRIBUTE = "expiresAt"
TABLE_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
"""The characters DynamoDB allows in a table name."""

Item = dict[str, dict[str, Any]]


class DynamoDBClient(Protocol):
    """The part of botocore's DynamoDB client the store uses."""

    def query(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...


def turn_sort_key(position: TurnPosition) -> str:
    return f"{TURN_PREFIX}{format_instant(position.sent_at)}#{position.turn_id}"


def position_of(sort_key: str) -> TurnPosition:
    instant, turn_id = sort_key.removeprefix(TURN_PREFIX).split("#", 1)
    return TurnPosition(parse_instant(instant), turn_id)


class DynamoDBConversationStore:
    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        turn_retention_days: int,
        clock: Any = time.time,
    ) -> None:
        self._client = client
        self._table = table_name
        self._retention_days = turn_retention_days
        self._clock = clock

    # -- reads ---------------------------------------------------------------------

    def snapshot(
        self, key: ConversationKey, since: datetime, before: TurnPosition, page_size: int
    ) -> Snapshot:
        """The state, and the turns sent from `since` and older than `before`, newest first.

        The first page comes back with the state; later pages are fetched only
        if the reader asks for them (the window usually stops within the first).
        """
        pages = self._query_pages(key, since, page_size)
        first = next(pages)
        state = NEW_CONVERSATION
        items = first
        if items and items[0]["SK"]["S"] == STATE_SK:
            state = self._live_state(items[0])
            items = items[1:]
        return Snapshot(state, self._turns(key, items, pages, before))

    def _live_state(self, item: Mapping[str, Any]) -> ConversationState:
        """The state, or a fresh one where its TTL passed (the version is kept for the lock)."""
        state = _state_from(item)
        ttl = item.get(TTL_ATTRIBUTE)
        if ttl and is_expired(int(ttl["N"]), datetime.fromtimestamp(self._clock(), UTC)):
            return ConversationState(version=state.version)
        return state

    def state(self, key: ConversationKey) -> ConversationState | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=_key(key.partition, STATE_SK),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return _state_from(item) if item else None

    def recorded(self, key: ConversationKey, turn_id: str) -> RecordedTurn | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=_key(key.partition, MARKER_PREFIX + turn_id),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return _marker_from(item) if item else None

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
        key: ConversationKey,
        first_page: list[Item],
        later_pages: Iterator[list[Item]],
        before: TurnPosition,
    ) -> Iterator[Turn]:
        now = datetime.fromtimestamp(self._clock(), UTC)
        boundary = turn_sort_key(before)
        page: list[Item] | None = first_page
        while page is not None:
            for item in page:
                if item["SK"]["S"] >= boundary:
                    continue  # recorded after the current message, or the message itself
                if is_expired(int(item[TTL_ATTRIBUTE]["N"]), now):
                    continue  # past its TTL; DynamoDB deletes lazily, days late
                yield _turn_from(item)
            page = next(later_pages, None)

    def unfolded_turns(
        self, key: ConversationKey, after: TurnPosition | None, limit: int
    ) -> list[StoredTurn]:
        """The turns newer than the fold's watermark, oldest first, at most `limit`.

        The read starts at the watermark, so its cost follows what is unfolded,
        never the conversation's length. Expired turns are skipped.
        """
        start = turn_sort_key(after) if after else TURN_PREFIX
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :start AND :state",
            "ExpressionAttributeValues": {
                ":pk": {"S": key.partition},
                ":start": {"S": start},
                ":state": {"S": STATE_SK},
            },
            "ScanIndexForward": True,
            "ConsistentRead": True,
            "Limit": limit + 2,
        }
        now = datetime.fromtimestamp(self._clock(), UTC)
        found: list[StoredTurn] = []
        while len(found) < limit:
            response = self._client.query(**request)
            for item in response.get("Items", []):
                sort_key = item["SK"]["S"]
                if sort_key in {start, STATE_SK} or len(found) == limit:
                    continue
                if not is_expired(int(item[TTL_ATTRIBUTE]["N"]), now):
                    found.append(StoredTurn(_turn_from(item), _number(item, "tokens")))
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
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
    ) -> None:
        """The contact's message and the state change, as one conditional transaction.

        Raises Duplicate when the message id is already recorded (nothing is
        written) and VersionConflict when another writer got there first.
        """
        encoded = encode_content(turn)
        check_item_size(encoded)
        ttl = expires_at(turn.sent_at, self._retention_days)
        state_ttl = self._state_ttl(turn)
        names = {"#version": "version"}
        values: dict[str, Any] = {
            ":next": {"N": str(change.expected_version + 1)},
            ":count": {"N": str(change.streak.count)},
            ":last": {"S": format_instant(change.streak.last_contact_at or turn.sent_at)},
            ":recent": {"L": [{"S": format_instant(t)} for t in change.recent_contact]},
            ":tokens": {"N": str(tokens)},
            ":one": {"N": "1"},
            ":state_ttl": {"N": str(state_ttl)},
        }
        sets = [
            "#version = :next",
            "streakCount = :count",
            "lastContactAt = :last",
            "recentContact = :recent",
            f"{TTL_ATTRIBUTE} = :state_ttl",
        ]
        if change.lease_until is not None:
            sets.append("leaseUntil = :lease")
            values[":lease"] = {"N": str(int(change.lease_until.timestamp()))}
        if change.expected_version == 0:
            condition = "attribute_not_exists(#version)"
        else:
            condition = "#version = :expected"
            values[":expected"] = {"N": str(change.expected_version)}
        state_update = {
            "TableName": self._table,
            "Key": _key(key.partition, STATE_SK),
            "UpdateExpression": "SET "
            + ", ".join(sets)
            + " ADD unfoldedTokens :tokens, unfoldedTurns :one, turnsRecorded :one",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        self._commit(
            key,
            turn,
            encoded=encoded,
            tokens=tokens,
            ttl=ttl,
            state_update=state_update,
            marker_extra=_marker_extra(turn_count, decision, dropped),
        )

    def record_reply(self, key: ConversationKey, turn: Turn, tokens: int) -> None:
        """An agent's (or a person's) reply: the turn and the counters, in one transaction.

        No read first: the counters move by increments, so no version is needed.
        """
        encoded = encode_content(turn)
        check_item_size(encoded)
        ttl = expires_at(turn.sent_at, self._retention_days)
        state_ttl = self._state_ttl(turn)
        state_update = {
            "TableName": self._table,
            "Key": _key(key.partition, STATE_SK),
            "UpdateExpression": "ADD unfoldedTokens :tokens, unfoldedTurns :one, turnsRecorded :one"
            f" SET {TTL_ATTRIBUTE} = :state_ttl",
            "ExpressionAttributeValues": {
                ":tokens": {"N": str(tokens)},
                ":one": {"N": "1"},
                ":state_ttl": {"N": str(state_ttl)},
            },
        }
        self._commit(
            key,
            turn,
            encoded=encoded,
            tokens=tokens,
            ttl=ttl,
            state_update=state_update,
            marker_extra={},
        )

    def _state_ttl(self, turn: Turn) -> int:
        """The state lives the retention past its latest write, whatever the turn's `sentAt`.

        A late turn (a reply filed with an old `sentAt`) must not bring the
        expiry of the fold and the counters forward.
        """
        now = datetime.fromtimestamp(self._clock(), UTC)
        return expires_at(max(turn.sent_at, now), self._retention_days)

    def release_lease(self, key: ConversationKey, lease_until: datetime) -> None:
        """Give back a lease this call took, when its compaction request could not be sent."""
        self._remove_lease(
            key,
            "leaseUntil = :mine",
            {":mine": {"N": str(int(lease_until.timestamp()))}},
        )

    def commit_fold(
        self,
        key: ConversationKey,
        fold: Fold,
        *,
        expected_version: int,
        folded_tokens: int,
        folded_turns: int,
    ) -> bool:
        """The new fold, if nobody committed one since `expected_version` was read.

        The counters drop by what was folded (by increments, so turns recorded
        meanwhile still count) and the lease clears. False when another
        compactor won: the loser neither overwrites nor loses a turn.
        """
        values: dict[str, Any] = {
            ":summary": {"S": fold.summary},
            ":watermark": {"S": turn_sort_key(fold.watermark)},
            ":version": {"N": str(fold.version)},
            ":from": {"S": format_instant(fold.covers_from)},
            ":until": {"S": format_instant(fold.covers_until)},
            ":folded": {"N": str(fold.turns_folded)},
            ":tokens": {"N": str(-folded_tokens)},
            ":turns": {"N": str(-folded_turns)},
        }
        if expected_version == 0:
            condition = "attribute_not_exists(foldVersion)"
        else:
            condition = "foldVersion = :expected"
            values[":expected"] = {"N": str(expected_version)}
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(key.partition, STATE_SK),
                UpdateExpression=(
                    "SET foldSummary = :summary, foldWatermark = :watermark, "
                    "foldVersion = :version, foldCoversFrom = :from, foldCoversUntil = :until, "
                    "turnsFolded = :folded "
                    "ADD unfoldedTokens :tokens, unfoldedTurns :turns "
                    "REMOVE leaseUntil"
                ),
                ConditionExpression=f"attribute_exists(SK) AND {condition}",
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def clear_lease(self, key: ConversationKey) -> None:
        """Nothing left to fold: let the next turn ask again when there is."""
        self._remove_lease(key, "attribute_exists(SK)", None)

    def _remove_lease(
        self, key: ConversationKey, condition: str, values: dict[str, Any] | None
    ) -> None:
        """Remove the lease if `condition` holds; if it does not, there is nothing to remove."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(key.partition, STATE_SK),
            "UpdateExpression": "REMOVE leaseUntil",
            "ConditionExpression": condition,
        }
        if values:
            request["ExpressionAttributeValues"] = values
        try:
            self._client.update_item(**request)
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def _commit(
        self,
        key: ConversationKey,
        turn: Turn,
        *,
        encoded: str,
        tokens: int,
        ttl: int,
        state_update: dict[str, Any],
        marker_extra: Item,
    ) -> None:
        sort_key = turn_sort_key(turn.position)
        turn_item: Item = {
            **_key(key.partition, sort_key),
            "turnId": {"S": turn.id},
            "role": {"S": turn.role},
            "sentAt": {"S": format_instant(turn.sent_at)},
            "content": {"S": encoded},
            "tokens": {"N": str(tokens)},
            TTL_ATTRIBUTE: {"N": str(ttl)},
        }
        marker: Item = {
            **_key(key.partition, MARKER_PREFIX + turn.id),
            "turnSk": {"S": sort_key},
            "role": {"S": turn.role},
            "digest": {"S": content_digest(turn.role, list(turn.content))},
            TTL_ATTRIBUTE: {"N": str(ttl)},
        }
        marker.update(marker_extra)
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {"Put": {**_put(self._table, marker), "ConditionExpression": _ABSENT}},
                    {"Put": {**_put(self._table, turn_item), "ConditionExpression": _ABSENT}},
                    {"Update": state_update},
                ]
            )
        except ClientError as error:
            self._explain_cancellation(key, turn, error)
            raise

    def _explain_cancellation(self, key: ConversationKey, turn: Turn, error: ClientError) -> None:
        if error.response["Error"]["Code"] != "TransactionCanceledException":
            return
        codes = [reason.get("Code") for reason in error.response.get("CancellationReasons", [])]
        marker_code = codes[0] if codes else None
        if marker_code == "ConditionalCheckFailed":
            first = self.recorded(key, turn.id)
            if first is not None:
                raise Duplicate(first) from None
        if "ConditionalCheckFailed" in codes or _TRANSIENT_CANCELLATIONS.intersection(codes):
            raise VersionConflict() from None


_ABSENT = "attribute_not_exists(SK)"
_TRANSIENT_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
"""Cancellation reasons that leave nothing written and clear by themselves.

botocore does not retry a TransactionCanceledException, whatever its reasons, so an
item throttled inside a transaction (`ThrottlingError`, `ProvisionedThroughputExceeded`)
used to fail the call with a 500; raised as VersionConflict, the commit is read again
and retried with backoff like a lost race (found by tests/integration/test_faults.py).
"""


def _key(partition: str, sort_key: str) -> Item:
    return {"PK": {"S": partition}, "SK": {"S": sort_key}}


def _put(table: str, item: Item) -> dict[str, Any]:
    return {"TableName": table, "Item": item}


def _turn_from(item: Mapping[str, Any]) -> Turn:
    return Turn(
        id=item["turnId"]["S"],
        role=item["role"]["S"],
        content=json.loads(item["content"]["S"]),
        sent_at=parse_instant(item["sentAt"]["S"]),
    )


def _number(item: Mapping[str, Any], name: str, default: int = 0) -> int:
    value = item.get(name)
    return int(value["N"]) if value else default


def _instant(item: Mapping[str, Any], name: str) -> datetime | None:
    value = item.get(name)
    return parse_instant(value["S"]) if value else None


def _state_from(item: Mapping[str, Any]) -> ConversationState:
    lease = item.get("leaseUntil")
    recent = item.get("recentContact", {}).get("L", [])
    return ConversationState(
        version=_number(item, "version"),
        streak=Streak(_number(item, "streakCount"), _instant(item, "lastContactAt")),
        recent_contact=tuple(parse_instant(value["S"]) for value in recent),
        unfolded_tokens=max(0, _number(item, "unfoldedTokens")),
        unfolded_turns=max(0, _number(item, "unfoldedTurns")),
        lease_until=datetime.fromtimestamp(int(lease["N"]), UTC) if lease else None,
        fold=_fold_from(item),
        turns_recorded=_number(item, "turnsRecorded"),
    )


def _fold_from(item: Mapping[str, Any]) -> Fold | None:
    if "foldSummary" not in item:
        return None
    covers_from = _instant(item, "foldCoversFrom")
    covers_until = _instant(item, "foldCoversUntil")
    # The compactor writes the covered range with the summary, always.
    assert covers_from is not None
    assert covers_until is not None
    return Fold(
        summary=item["foldSummary"]["S"],
        watermark=position_of(item["foldWatermark"]["S"]),
        version=_number(item, "foldVersion"),
        covers_from=covers_from,
        covers_until=covers_until,
        turns_folded=_number(item, "turnsFolded"),
    )


def _marker_extra(turn_count: int, decision: str, dropped: int | None) -> Item:
    """What a converse answered, kept with the message id so that a retry gets the same."""
    extra: Item = {"turnCount": {"N": str(turn_count)}, "decision": {"S": decision}}
    if dropped is not None:
        extra["dropped"] = {"N": str(dropped)}
    return extra


def _marker_from(item: Mapping[str, Any]) -> RecordedTurn:
    decision = item.get("decision")
    return RecordedTurn(
        position=position_of(item["turnSk"]["S"]),
        role=item["role"]["S"],
        digest=item["digest"]["S"],
        turn_count=_number(item, "turnCount") if "turnCount" in item else None,
        decision=decision["S"] if decision else None,
        dropped=_number(item, "dropped") if "dropped" in item else None,
    )
