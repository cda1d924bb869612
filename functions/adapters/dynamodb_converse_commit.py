"""What a converse call writes: a turn, its message-id marker and the state, in one transaction.

The transaction puts the marker and the turn only where they are absent, and
updates the state under a condition: for a contact's message, the version the
call read; for any turn that is not late, that it still sorts above the
compaction marks. Its cancellation reasons say which failed: a duplicate
message id, a lost race, or a late turn. A call that took the compaction lease
and could not send its request gives the lease back here too.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from adapters.conversation_store import (
    ConversationKey,
    Duplicate,
    ErasedSince,
    StateChange,
    VersionConflict,
    check_item_size,
    encode_content,
    format_instant,
)
from adapters.dynamodb_items import (
    ERASED_AT,
    LAST_WINDOW_AT,
    RECORDED_AT,
    STATE_SK,
    TTL_ATTRIBUTE,
    Item,
    contacts_entry,
    item_key,
    marker_answer,
    marker_from,
    marker_item,
    marker_sort_key,
    stable_edge_update,
    state_from,
    turn_item,
    turn_sort_key,
    usage_attribute,
)
from adapters.dynamodb_table import DynamoDBTable
from memory_core.erasure import erased
from memory_core.history_range import expires_at
from memory_core.turns import Turn, TurnPosition
from memory_core.usage import TokenUsage


class DynamoDBConverseCommit(DynamoDBTable):
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
        if change.window_at is not None:
            sets.append(f"{LAST_WINDOW_AT} = :window_at")
            values[":window_at"] = {"S": format_instant(change.window_at)}
        if change.list_contact:
            # Once a conversation: a later update leaves the index's keys, so the index
            # is not written again (docs/decisions.md, "The contacts index").
            sets += _listing(key, values, unless_listed=False)
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
        removes = stable_edge_update(change.stable_edge, sets, values)
        state_update = {
            "TableName": self._table,
            "Key": item_key(key.partition, STATE_SK),
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
                marker_extra=marker_answer(
                    turn_count, decision, dropped, memory_version, window_from
                ),
                erased_at=change.erased_at,
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
        erased_at: datetime | None = None,
    ) -> None:
        """An agent's (or a person's) reply: the turn and the counters, in one transaction.

        No read first: the counters move by increments, so no version is needed.
        The commit expects the turn to sort above the compaction marks; when it
        does not, the reply is late and is recorded again onto the late list.
        The model's `usage` is an attribute of the turn item (`usage`, a map of
        Converse's names), beside its content, never inside it.

        The state must not have been erased since the turn's arrival; ErasedSince
        when it was (the caller stamps the turn after the fence). `erased_at`, the
        fence the caller read, lets the turn replace a marker recorded before it.
        """
        encoded = encode_content(turn)
        check_item_size(encoded)
        extra = usage_attribute(usage)
        commit = functools.partial(
            self._record_reply,
            key,
            turn,
            encoded,
            tokens,
            lifetime_days,
            turn_extra=extra,
            erased_at=erased_at,
        )
        try:
            commit(late=False)
        except _StateConditionFailed:
            # The marks only move forward: a late reply stays late, one more commit.
            try:
                commit(late=True)
            except _StateConditionFailed:
                self._erased_since(key, turn)
                raise

    def _erased_since(self, key: ConversationKey, turn: Turn) -> None:
        """Raises ErasedSince when an erase is why the reply's state condition failed."""
        item = self._read_item(key.partition, STATE_SK)
        fence = state_from(item).erased_at if item else None
        if fence is not None and erased(turn.position, fence):
            raise ErasedSince(fence) from None

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
        erased_at: datetime | None,
    ) -> None:
        sort_key = {"S": turn_sort_key(turn.position)}
        values: dict[str, Any] = {
            ":one": {"N": "1"},
            ":tokens": {"N": str(tokens)},
            ":state_ttl": {"N": str(self._state_ttl(turn, lifetime_days))},
            ":sent": {"S": format_instant(turn.sent_at)},
        }
        sets = [
            f"{TTL_ATTRIBUTE} = :state_ttl",
            # A reply reads nothing first: it lists a conversation only if nothing has.
            *_listing(key, values, unless_listed=True),
        ]
        condition = _NOT_ERASED_SINCE
        if late:
            sets.append(_join_the_late_list(sort_key, tokens, values))
        else:
            values[":sk"] = sort_key
            condition += " AND " + _ABOVE_THE_MARKS
        state_update: dict[str, Any] = {
            "TableName": self._table,
            "Key": item_key(key.partition, STATE_SK),
            "UpdateExpression": "SET " + ", ".join(sets) + _COUNT_THE_TURN,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        self._commit(
            key,
            turn,
            encoded=encoded,
            tokens=tokens,
            ttl=expires_at(turn.sent_at, lifetime_days),
            state_update=state_update,
            marker_extra={},
            turn_extra=turn_extra,
            erased_at=erased_at,
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
        self._update_state_if(key, "REMOVE leaseUntil", "leaseUntil = :mine", mine)

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
        erased_at: datetime | None = None,
    ) -> None:
        turn_put: Item = {
            **turn_item(key.partition, turn, encoded=encoded, tokens=tokens, ttl=ttl),
            **(turn_extra or {}),
        }
        marker: Item = {**marker_item(key.partition, turn, ttl=ttl), **marker_extra}
        marker_put: dict[str, Any] = {**self._put(marker), "ConditionExpression": _ABSENT}
        if erased_at is not None:
            # A marker recorded before the erase is no one's: the id is a new message.
            marker_put["ConditionExpression"] = f"{_ABSENT} OR NOT {RECORDED_AT} > :fence"
            marker_put["ExpressionAttributeValues"] = {":fence": {"S": format_instant(erased_at)}}
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            **marker_put,
                            # A duplicate's first recording comes back with the refusal.
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {"Put": {**self._put(turn_put), "ConditionExpression": _ABSENT}},
                    {"Update": state_update},
                ]
            )
        except ClientError as error:
            self._explain_cancellation(key, turn, error)
            raise

    def _explain_cancellation(self, key: ConversationKey, turn: Turn, error: ClientError) -> None:
        """Raises what a cancelled transaction means; returns for any other error."""
        if error.response["Error"]["Code"] != "TransactionCanceledException":
            return
        reasons = error.response.get("CancellationReasons", [])
        codes = [reason.get("Code") for reason in reasons]
        marker_code = codes[0] if codes else None
        if marker_code == "ConditionalCheckFailed":
            # The marker is read again where the refusal did not bring it back.
            first = reasons[0].get("Item") or self._read_item(
                key.partition, marker_sort_key(turn.id)
            )
            if first:
                raise Duplicate(marker_from(first)) from None
        if codes[2:3] == ["ConditionalCheckFailed"] and marker_code != "ConditionalCheckFailed":
            raise _StateConditionFailed() from None
        if "ConditionalCheckFailed" in codes or _TRANSIENT_CANCELLATIONS.intersection(codes):
            raise VersionConflict() from None


class _StateConditionFailed(Exception):
    """The state's condition failed alone: a newer version, or the turn is late."""


def _listing(key: ConversationKey, values: dict[str, Any], *, unless_listed: bool) -> list[str]:
    """The SET clauses that list the conversation in the contacts index, their values put
    into `values`; `unless_listed` keeps keys already there (a write that read nothing)."""
    clauses = []
    for name, value in contacts_entry(key.tenant_id, key.contact_id).items():
        values[f":{name}"] = value
        clauses.append(
            f"{name} = if_not_exists({name}, :{name})" if unless_listed else f"{name} = :{name}"
        )
    return clauses


def _join_the_late_list(sort_key: dict[str, str], tokens: int, values: dict[str, Any]) -> str:
    """The SET clause that appends the turn to the late list (created if absent).

    Its estimate goes with it, so that the counters still come right if the
    turn's TTL deletes it before compaction reads it.
    """
    values[":none"] = {"L": []}
    values[":this"] = {"L": [{"M": {"sk": sort_key, "tokens": {"N": str(tokens)}}}]}
    return "lateTurns = list_append(if_not_exists(lateTurns, :none), :this)"


_COUNT_THE_TURN = " ADD unfoldedTokens :tokens, unfoldedTurns :one, turnsRecorded :one"


_NOT_ERASED_SINCE = f"(attribute_not_exists({ERASED_AT}) OR {ERASED_AT} < :sent)"
"""The turn sorts after the conversation's latest erase (`memory_core.erasure`)."""
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
