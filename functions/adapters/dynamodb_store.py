"""The conversation store on one DynamoDB table: keys, items, conditions, TTL.

Single-table layout, every key prefixed by the tenant:

| item | PK | SK |
| --- | --- | --- |
| turn | `TENANT#t#CONTACT#c` | `TURN#<sentAt>#<recordedAt>#<turnId>` |
| message-id marker | same | `MSGID#<turnId>` |
| memory as a compaction wrote it | same | `FOLD#<compaction version>` |
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
from collections.abc import Iterator, Mapping, Sequence
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
from memory_core.conversation import NEW_CONVERSATION, ConversationState, Fold, LateTurn
from memory_core.history_range import expires_at, is_expired
from memory_core.stable_window import StableEdge
from memory_core.turn_cap import Streak
from memory_core.turns import Turn, TurnPosition
from memory_core.usage import TokenUsage

STATE_SK = "TURN#~STATE"
TURN_PREFIX = "TURN#"
MARKER_PREFIX = "MSGID#"
FOLD_PREFIX = "FOLD#"
FOLD_VERSION_DIGITS = 12
"""Fixed width, so the memory items sort by version."""
TTL_ATTRIBUTE = "expiresAt"
USAGE_ATTRIBUTE = "usage"
"""A reply's turn item: the model's token usage, as reported with it."""
TURNS_END = TURN_PREFIX + "~"
"""Sorts after every turn key and before the state's (`TURN#~STATE`)."""
TABLE_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
"""The characters DynamoDB allows in a table name."""

Item = dict[str, dict[str, Any]]
BATCH_GET_LIMIT = 100
"""Keys per BatchGetItem request, DynamoDB's limit."""


class DynamoDBClient(Protocol):
    """The part of botocore's DynamoDB client the store uses."""

    def query(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]: ...


def turn_sort_key(position: TurnPosition) -> str:
    """Sorts as the positions do: fixed-width instants, then the id."""
    sent, recorded = format_instant(position.sent_at), format_instant(position.recorded_at)
    return f"{TURN_PREFIX}{sent}#{recorded}#{position.turn_id}"


def position_of(sort_key: str) -> TurnPosition:
    sent, recorded, turn_id = sort_key.removeprefix(TURN_PREFIX).split("#", 2)
    return TurnPosition(parse_instant(sent), parse_instant(recorded), turn_id)


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

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

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
        if ttl and is_expired(int(ttl["N"]), self._now()):
            # The lock and the compaction marks stay: the commit's conditions compare them.
            return ConversationState(
                version=state.version,
                watermark=state.watermark,
                folding_through=state.folding_through,
                late_turns=state.late_turns,
                compaction_version=state.compaction_version,
            )
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

    def fold_at(self, key: ConversationKey, version: int) -> Fold | None:
        """The memory compaction `version` wrote, as a replay's first answer served it."""
        response = self._client.get_item(
            TableName=self._table,
            Key=_key(key.partition, _fold_sort_key(version)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item or is_expired(int(item[TTL_ATTRIBUTE]["N"]), self._now()):
            return None
        return _fold_from(item)

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
        now = self._now()
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
        """The turns newer than the watermark, oldest first, at most `limit`.

        The read starts at the watermark, so its cost follows what is unfolded,
        never the conversation's length. Turns past their TTL come back marked
        `expired`: the compactor passes over them but moves the counters and
        the watermark past them.
        """
        start = turn_sort_key(after) if after else TURN_PREFIX
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
                found.append(_stored_from(item, now))
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found

    def turns_at(self, key: ConversationKey, positions: Sequence[TurnPosition]) -> list[StoredTurn]:
        """The turns at these positions (the late list), oldest first; deleted ones are absent."""
        now = self._now()
        found: list[StoredTurn] = []
        keys = [_key(key.partition, turn_sort_key(p)) for p in sorted(set(positions))]
        for start in range(0, len(keys), BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                self._table: {"Keys": keys[start : start + BATCH_GET_LIMIT], "ConsistentRead": True}
            }
            while request:
                response = self._client.batch_get_item(RequestItems=request)
                found += [
                    _stored_from(i, now) for i in response.get("Responses", {}).get(self._table, [])
                ]
                request = response.get("UnprocessedKeys") or {}
        return sorted(found, key=lambda stored: stored.turn.position)

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
        """The contact's message and the state change, as one conditional transaction.

        The message-id marker keeps what the answer needs to be given again
        (the count, the decision, what the window dropped, the memory's version);
        the turn, its marker and the state live `lifetime_days`.

        `change.late` comes from the state the caller read: a late turn joins
        the late list, any other must still sort above the compaction marks
        (the version does not follow the compactor). Raises
        Duplicate when the message id is already recorded (nothing is written)
        and VersionConflict when another writer got there first.
        """
        encoded = encode_content(turn)
        check_item_size(encoded)
        ttl = expires_at(turn.sent_at, lifetime_days)
        state_ttl = self._state_ttl(turn, lifetime_days)
        names = {"#version": "version"}
        values: dict[str, Any] = {
            ":next": {"N": str(change.expected_version + 1)},
            ":count": {"N": str(change.streak.count)},
            ":last": {"S": format_instant(change.streak.last_contact_at or turn.sent_at)},
            ":recent": {"L": [{"S": format_instant(t)} for t in change.recent_contact]},
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
        sort_key = {"S": turn_sort_key(turn.position)}
        if change.late:
            sets.append(_join_the_late_list(sort_key, tokens, values))
        else:
            condition += " AND " + _ABOVE_THE_MARKS
            values[":sk"] = sort_key
        values[":tokens"] = {"N": str(tokens)}
        removes = _stable_edge_update(change.stable_edge, sets, values)
        state_update = {
            "TableName": self._table,
            "Key": _key(key.partition, STATE_SK),
            "UpdateExpression": "SET " + ", ".join(sets) + removes + _COUNT_THE_TURN,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        try:
            self._commit(
                key,
                turn,
                encoded=encoded,
                tokens=tokens,
                ttl=ttl,
                state_update=state_update,
                marker_extra=_marker_extra(
                    turn_count, decision, dropped, memory_version, window_from
                ),
            )
        except _StateConditionFailed:
            raise VersionConflict() from None

    def record_reply(
        self,
        key: ConversationKey,
        turn: Turn,
        tokens: int,
        *,
        lifetime_days: int,
        usage: TokenUsage | None = None,
    ) -> None:
        """An agent's (or a person's) reply: the turn and the counters, in one transaction.

        No read first: the counters move by increments, so no version is needed.
        The commit expects the turn to sort above the compaction marks; when it
        does not, the reply is late and is recorded again onto the late list.
        The model's `usage` is an attribute of the turn item (`usage`, a map of
        Converse's names), beside its content, never inside it.
        """
        encoded = encode_content(turn)
        check_item_size(encoded)
        extra = _usage_attribute(usage)
        try:
            self._record_reply(
                key, turn, encoded, tokens, lifetime_days, turn_extra=extra, late=False
            )
        except _StateConditionFailed:
            # The marks only move forward: a late reply stays late, one more commit.
            self._record_reply(
                key, turn, encoded, tokens, lifetime_days, turn_extra=extra, late=True
            )

    def _record_reply(
        self,
        key: ConversationKey,
        turn: Turn,
        encoded: str,
        tokens: int,
        lifetime_days: int,
        *,
        turn_extra: Item,
        late: bool,
    ) -> None:
        sort_key = {"S": turn_sort_key(turn.position)}
        values: dict[str, Any] = {
            ":one": {"N": "1"},
            ":tokens": {"N": str(tokens)},
            ":state_ttl": {"N": str(self._state_ttl(turn, lifetime_days))},
        }
        sets = [f"{TTL_ATTRIBUTE} = :state_ttl"]
        if late:
            sets.append(_join_the_late_list(sort_key, tokens, values))
        else:
            values[":sk"] = sort_key
        state_update: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(key.partition, STATE_SK),
            "UpdateExpression": "SET " + ", ".join(sets) + _COUNT_THE_TURN,
            "ExpressionAttributeValues": values,
        }
        if not late:
            state_update["ConditionExpression"] = _ABOVE_THE_MARKS
        self._commit(
            key,
            turn,
            encoded=encoded,
            tokens=tokens,
            ttl=expires_at(turn.sent_at, lifetime_days),
            state_update=state_update,
            marker_extra={},
            turn_extra=turn_extra,
        )

    def _state_ttl(self, turn: Turn, lifetime_days: int) -> int:
        """The state lives as long as a turn recorded now, whatever the turn's `sentAt`.

        A late turn (a reply filed with an old `sentAt`) must not bring the
        expiry of the fold and the counters forward.
        """
        return expires_at(max(turn.sent_at, self._now()), lifetime_days)

    def release_lease(self, key: ConversationKey, lease_until: datetime) -> None:
        """Give back a lease this call took, when its compaction request could not be sent."""
        mine = {":mine": {"N": str(int(lease_until.timestamp()))}}
        self._conditional_update(key, "REMOVE leaseUntil", "leaseUntil = :mine", mine)

    def claim(
        self,
        key: ConversationKey,
        through: TurnPosition,
        *,
        expected_version: int,
        expected_recorded: int,
    ) -> bool:
        """Mark the newest turn a compaction is about to fold, before it summarises.

        From here on a turn recorded at or below `through` is late, so none can
        slip under the new watermark unfolded while the summary is written.
        The condition on `turnsRecorded` makes sure no turn arrived between the
        compactor's read and this mark; False when one did (or another
        compactor committed): read again.
        """
        values: dict[str, Any] = {
            ":through": {"S": turn_sort_key(through)},
            ":recorded": {"N": str(expected_recorded)},
        }
        condition = "turnsRecorded = :recorded AND " + _compaction_version_is(
            expected_version, values
        )
        return self._conditional_update(
            key, "SET foldingThrough = :through", f"attribute_exists(SK) AND {condition}", values
        )

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
        """The new fold and watermark, if no compaction committed since `expected_version`.

        `fold` is None when every turn passed was past its TTL: the summary
        stays, the watermark moves. The first `late_passed` entries of the
        late list go (late turns recorded meanwhile were appended after them,
        and stay). The counters drop by what was passed (by increments, so
        turns recorded meanwhile still count); the lease and the claim clear.
        False when another compactor won: the loser neither overwrites nor
        loses a turn.

        A new fold is also kept as its own item, `FOLD#<version>`, in the same
        transaction: an answer records the version of the memory it served,
        and a replay after later folds answers with that memory again. It lives
        as long as any turn can (twice the retention, an upper bound of every
        tenant's turn lifetime), since the compactor does not know the tenant's rules.
        """
        values: dict[str, Any] = {
            ":version": {"N": str(expected_version + 1)},
            ":tokens": {"N": str(-passed_tokens)},
            ":turns": {"N": str(-passed_turns)},
        }
        sets = ["foldVersion = :version"]
        if watermark is not None:
            sets.append("foldWatermark = :watermark")
            values[":watermark"] = {"S": turn_sort_key(watermark)}
        removals = ["leaseUntil", "foldingThrough"]
        removals += [f"lateTurns[{index}]" for index in range(late_passed)]
        if fold is not None:
            sets += [
                "foldSummary = :summary",
                "foldCoversFrom = :from",
                "foldCoversUntil = :until",
                "turnsFolded = :folded",
            ]
            values[":summary"] = {"S": fold.summary}
            values[":from"] = {"S": format_instant(fold.covers_from)}
            values[":until"] = {"S": format_instant(fold.covers_until)}
            values[":folded"] = {"N": str(fold.turns_folded)}
            sets.append("foldSummaryVersion = :summary_version")
            values[":summary_version"] = {"N": str(fold.version)}
        condition = _compaction_version_is(expected_version, values)
        update = (
            "SET "
            + ", ".join(sets)
            + " ADD unfoldedTokens :tokens, unfoldedTurns :turns REMOVE "
            + ", ".join(removals)
        )
        if fold is None:
            return self._conditional_update(
                key, update, f"attribute_exists(SK) AND {condition}", values
            )
        kept = self._fold_item(key, fold)
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": _key(key.partition, STATE_SK),
                            "UpdateExpression": update,
                            "ConditionExpression": f"attribute_exists(SK) AND {condition}",
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {"Put": _put(self._table, kept)},
                ]
            )
        except ClientError as error:
            if _state_check_failed(error):
                return False
            raise
        return True

    def _fold_item(self, key: ConversationKey, fold: Fold) -> Item:
        lifetime_days = 2 * self._retention_days
        return {
            **_key(key.partition, _fold_sort_key(fold.version)),
            "foldSummary": {"S": fold.summary},
            "foldCoversFrom": {"S": format_instant(fold.covers_from)},
            "foldCoversUntil": {"S": format_instant(fold.covers_until)},
            "turnsFolded": {"N": str(fold.turns_folded)},
            "foldSummaryVersion": {"N": str(fold.version)},
            TTL_ATTRIBUTE: {"N": str(expires_at(self._now(), lifetime_days))},
        }

    def clear_lease(self, key: ConversationKey, *, expected_recorded: int) -> None:
        """Nothing left to fold: let the next turn ask again when there is.

        With nothing above the watermark and no late turn, the unfolded counters are
        zero: they are set so, if no turn was recorded since the compactor's read
        (`turnsRecorded`). That heals a count that can no longer be subtracted, such as
        a turn DynamoDB's TTL deleted before compaction read it. If a turn did arrive,
        only the lease goes; if the state is gone, there is nothing to remove.
        """
        zero = {":zero": {"N": "0"}, ":recorded": {"N": str(expected_recorded)}}
        settled = self._conditional_update(
            key,
            "SET unfoldedTokens = :zero, unfoldedTurns = :zero REMOVE leaseUntil",
            "turnsRecorded = :recorded",
            zero,
        )
        if not settled:
            self._conditional_update(key, "REMOVE leaseUntil", "attribute_exists(SK)")

    def _conditional_update(
        self,
        key: ConversationKey,
        update: str,
        condition: str,
        values: dict[str, Any] | None = None,
    ) -> bool:
        """The state updated if `condition` holds; False (nothing written) if it does not."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(key.partition, STATE_SK),
            "UpdateExpression": update,
            "ConditionExpression": condition,
        }
        if values:  # DynamoDB refuses an empty map
            request["ExpressionAttributeValues"] = values
        try:
            self._client.update_item(**request)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

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
        turn_extra: Item | None = None,
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
            **(turn_extra or {}),
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
                    {
                        "Put": {
                            **_put(self._table, marker),
                            "ConditionExpression": _ABSENT,
                            # A duplicate's first recording comes back with the refusal.
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
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
        reasons = error.response.get("CancellationReasons", [])
        codes = [reason.get("Code") for reason in reasons]
        marker_code = codes[0] if codes else None
        if marker_code == "ConditionalCheckFailed":
            existing = reasons[0].get("Item")
            first = _marker_from(existing) if existing else self.recorded(key, turn.id)
            if first is not None:
                raise Duplicate(first) from None
        if codes[2:3] == ["ConditionalCheckFailed"] and marker_code != "ConditionalCheckFailed":
            raise _StateConditionFailed() from None
        if "ConditionalCheckFailed" in codes or _TRANSIENT_CANCELLATIONS.intersection(codes):
            raise VersionConflict() from None


class _StateConditionFailed(Exception):
    """The state's condition failed alone: a newer version, or the turn is late."""


_COUNT_THE_TURN = " ADD unfoldedTokens :tokens, unfoldedTurns :one, turnsRecorded :one"


_ABSENT = "attribute_not_exists(SK)"
_ABOVE_THE_MARKS = (
    "(attribute_not_exists(foldWatermark) OR foldWatermark < :sk)"
    " AND (attribute_not_exists(foldingThrough) OR foldingThrough < :sk)"
)
"""The turn sorts after the watermark and any compaction's claim: it can still be folded.

Sort keys compare as the positions do (fixed-width instants, then the id)."""
_TRANSIENT_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
"""Cancellation reasons that leave nothing written and clear by themselves.

botocore does not retry a TransactionCanceledException, whatever its reasons, so an
item throttled inside a transaction (`ThrottlingError`, `ProvisionedThroughputExceeded`)
used to fail the call with a 500; raised as VersionConflict, the commit is read again
and retried with backoff like a lost race (found by tests/integration/test_faults.py).
"""


def _state_check_failed(error: ClientError) -> bool:
    """The transaction was cancelled because the state's (first item's) condition failed."""
    if error.response["Error"]["Code"] != "TransactionCanceledException":
        return False
    reasons = error.response.get("CancellationReasons", [])
    return bool(reasons) and reasons[0].get("Code") == "ConditionalCheckFailed"


def _fold_sort_key(version: int) -> str:
    return f"{FOLD_PREFIX}{version:0{FOLD_VERSION_DIGITS}d}"


def _join_the_late_list(sort_key: dict[str, str], tokens: int, values: dict[str, Any]) -> str:
    """The SET clause that appends the turn to the late list (created if absent).

    Its estimate goes with it, so that the counters still come right if the
    turn's TTL deletes it before compaction reads it.
    """
    values[":none"] = {"L": []}
    values[":this"] = {"L": [{"M": {"sk": sort_key, "tokens": {"N": str(tokens)}}}]}
    return "lateTurns = list_append(if_not_exists(lateTurns, :none), :this)"


def _compaction_version_is(expected: int, values: dict[str, Any]) -> str:
    if expected == 0:
        return "attribute_not_exists(foldVersion)"
    values[":expected"] = {"N": str(expected)}
    return "foldVersion = :expected"


def _key(partition: str, sort_key: str) -> Item:
    return {"PK": {"S": partition}, "SK": {"S": sort_key}}


def _put(table: str, item: Item) -> dict[str, Any]:
    return {"TableName": table, "Item": item}


def _turn_from(item: Mapping[str, Any]) -> Turn:
    position = position_of(item["SK"]["S"])
    return Turn(
        id=item["turnId"]["S"],
        role=item["role"]["S"],
        content=json.loads(item["content"]["S"]),
        sent_at=position.sent_at,
        recorded_at=position.recorded_at,
    )


def _stored_from(item: Mapping[str, Any], now: datetime) -> StoredTurn:
    expired = is_expired(int(item[TTL_ATTRIBUTE]["N"]), now)
    usage = item.get(USAGE_ATTRIBUTE)
    return StoredTurn(
        _turn_from(item),
        _number(item, "tokens"),
        expired,
        usage=_usage_from(usage["M"]) if usage else None,
    )


def _usage_attribute(usage: TokenUsage | None) -> Item:
    """The turn item's `usage`: the fields the model reported, as numbers."""
    if usage is None:
        return {}
    reported = {name: {"N": str(value)} for name, value in usage.as_json().items()}
    return {USAGE_ATTRIBUTE: {"M": reported}}


def _usage_from(reported: Mapping[str, Any]) -> TokenUsage:
    return TokenUsage.from_json({name: value["N"] for name, value in reported.items()})


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
        watermark=_position(item, "foldWatermark"),
        folding_through=_position(item, "foldingThrough"),
        late_turns=tuple(_late_turn(v["M"]) for v in item.get("lateTurns", {}).get("L", [])),
        compaction_version=_number(item, "foldVersion"),
        turns_recorded=_number(item, "turnsRecorded"),
        stable_edge=_stable_edge_from(item),
    )


def _late_turn(entry: Mapping[str, Any]) -> LateTurn:
    return LateTurn(position_of(entry["sk"]["S"]), int(entry["tokens"]["N"]))


def _position(item: Mapping[str, Any], name: str) -> TurnPosition | None:
    value = item.get(name)
    return position_of(value["S"]) if value else None


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
        covers_from=covers_from,
        covers_until=covers_until,
        turns_folded=_number(item, "turnsFolded"),
        # A summary written before versions were kept: the state's compaction version.
        version=_number(item, "foldSummaryVersion", _number(item, "foldVersion")),
    )


def _marker_extra(
    turn_count: int,
    decision: str,
    dropped: int | None,
    memory_version: int,
    window_from: TurnPosition | None,
) -> Item:
    """What a converse answered, kept with the message id so that a retry gets the same."""
    extra: Item = {
        "turnCount": {"N": str(turn_count)},
        "decision": {"S": decision},
        "memoryVersion": {"N": str(memory_version)},
    }
    if dropped is not None:
        extra["dropped"] = {"N": str(dropped)}
    if window_from is not None:
        extra["windowFrom"] = {"S": turn_sort_key(window_from)}
    return extra


def _stable_edge_update(edge: StableEdge | None, sets: list[str], values: Item) -> str:
    """The edge's attributes SET into `sets` and `values`; or the REMOVE clause clearing them."""
    if edge is None:
        return " REMOVE windowEdge, windowMemory, windowWatermark"
    sets += ["windowEdge = :window_edge", "windowMemory = :window_memory"]
    values[":window_edge"] = {"S": turn_sort_key(edge.oldest)}
    values[":window_memory"] = {"N": str(edge.memory_version)}
    if edge.watermark is None:
        return " REMOVE windowWatermark"
    sets.append("windowWatermark = :window_watermark")
    values[":window_watermark"] = {"S": turn_sort_key(edge.watermark)}
    return ""


def _stable_edge_from(item: Mapping[str, Any]) -> StableEdge | None:
    oldest = _position(item, "windowEdge")
    if oldest is None:
        return None
    return StableEdge(oldest, _number(item, "windowMemory"), _position(item, "windowWatermark"))


def _marker_from(item: Mapping[str, Any]) -> RecordedTurn:
    decision = item.get("decision")
    return RecordedTurn(
        position=position_of(item["turnSk"]["S"]),
        role=item["role"]["S"],
        digest=item["digest"]["S"],
        turn_count=_number(item, "turnCount") if "turnCount" in item else None,
        decision=decision["S"] if decision else None,
        dropped=_number(item, "dropped") if "dropped" in item else None,
        memory_version=_number(item, "memoryVersion") if "memoryVersion" in item else None,
        window_from=_position(item, "windowFrom"),
    )
