"""What the compactor writes: its claim, the new fold and watermark, and the cleared lease.

Each write is conditional on the compaction version (`foldVersion`) or the
turn count (`turnsRecorded`) the compactor read, so a compactor that lost a
race writes nothing and reads again; the counters move by increments, so the
turns recorded meanwhile still count.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_items import (
    FOLD_ATTRIBUTES,
    MEMORY_SK,
    STATE_SK,
    fold_item,
    item_key,
    turn_sort_key,
)
from adapters.dynamodb_table import DynamoDBTable
from memory_core.conversation import Fold
from memory_core.history_range import expires_at
from memory_core.turns import TurnPosition


class DynamoDBFoldCommit(DynamoDBTable):
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
        return self._update_state_if(
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

        A new fold is written to the memory item the converse Query reads
        (`TURN#~MEMORY`), in the transaction, not to the state, which every call
        rewrites. Once committed, it is also kept as its own item, `FOLD#<version>`:
        an answer records the version of the memory it served, and a replay after
        later folds answers with that memory again. (Should that write fail, the
        compaction is still done; such a replay then leaves the memory out and logs
        it, as it does for a memory past its TTL.) Both live as long as any turn can
        (twice the retention, an upper bound of every tenant's turn lifetime), since
        the compactor does not know the tenant's rules.
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
            # The memory moves to its own item; a state written before carried it.
            removals += FOLD_ATTRIBUTES
        condition = _compaction_version_is(expected_version, values)
        update = (
            "SET "
            + ", ".join(sets)
            + " ADD unfoldedTokens :tokens, unfoldedTurns :turns REMOVE "
            + ", ".join(removals)
        )
        if fold is None:
            return self._update_state_if(
                key, update, f"attribute_exists(SK) AND {condition}", values
            )
        ttl = expires_at(self._now(), 2 * self._retention_days)
        kept = fold_item(key.partition, fold, ttl=ttl)
        served = fold_item(key.partition, fold, ttl=ttl, sort_key=MEMORY_SK)
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": item_key(key.partition, STATE_SK),
                            "UpdateExpression": update,
                            "ConditionExpression": f"attribute_exists(SK) AND {condition}",
                            "ExpressionAttributeValues": values,
                        }
                    },
                    {"Put": self._put(served)},
                ]
            )
        except ClientError as error:
            if _state_check_failed(error):
                return False
            raise
        # After the commit, outside it: a plain write bills half a transactional one, and
        # the copy is read only once a later fold has replaced this memory.
        self._client.put_item(**self._put(kept))
        return True

    def clear_lease(
        self, key: ConversationKey, *, expected_recorded: int, expected_version: int
    ) -> None:
        """Nothing left to fold: let the next turn ask again when there is.

        With nothing above the watermark and no late turn, the unfolded counters are
        zero: they are set so, if no turn was recorded since the compactor's read
        (`turnsRecorded`). That heals a count that can no longer be subtracted, such as
        a turn DynamoDB's TTL deleted before compaction read it. If a turn did arrive,
        only the lease goes; if the state is gone, there is nothing to remove. Both
        hold to the compaction version read: after an erase (which moves it), the
        lease and the counters are the new conversation's, not this compaction's.
        """
        values: dict[str, Any] = {":zero": {"N": "0"}, ":recorded": {"N": str(expected_recorded)}}
        same_compaction = _compaction_version_is(expected_version, values)
        settled = self._update_state_if(
            key,
            "SET unfoldedTokens = :zero, unfoldedTurns = :zero REMOVE leaseUntil",
            f"turnsRecorded = :recorded AND {same_compaction}",
            values,
        )
        if not settled:
            values = {}
            same_compaction = _compaction_version_is(expected_version, values)
            self._update_state_if(
                key, "REMOVE leaseUntil", f"attribute_exists(SK) AND {same_compaction}", values
            )


def _compaction_version_is(expected: int, values: dict[str, Any]) -> str:
    if expected == 0:
        return "attribute_not_exists(foldVersion)"
    values[":expected"] = {"N": str(expected)}
    return "foldVersion = :expected"


def _state_check_failed(error: ClientError) -> bool:
    """The transaction was cancelled because the state's (first item's) condition failed."""
    if error.response["Error"]["Code"] != "TransactionCanceledException":
        return False
    reasons = error.response.get("CancellationReasons", [])
    return bool(reasons) and reasons[0].get("Code") == "ConditionalCheckFailed"
