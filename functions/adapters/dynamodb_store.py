"""The conversation store on one DynamoDB table, composed of one module a concern.

`DynamoDBConversationStore` is the production `ConversationStore`
(adapters/conversation_store.py). Its parts, each a class over the same
client, table and clock:

| module | what it holds |
| --- | --- |
| `dynamodb_items` | the table's layout: keys, sort keys, items to and from the domain |
| `dynamodb_table` | what the parts share: the client, reading an item, a conditional update |
| `dynamodb_reads` | the reads: the state with the newest turns, unfolded turns, markers, folds |
| `dynamodb_converse_commit` | the transaction that records a turn, and a lease given back |
| `dynamodb_fold_commit` | what the compactor writes: its claim, the fold, the cleared lease |
| `dynamodb_data` | a conversation's turns as recorded, and a tenant's contacts, in pages |
| `dynamodb_erasure` | an erase: the fence on the state, then the deletion of what it covers |
| `dynamodb_recall_index` | recall's index: the segments of folded turns' term counts, merged |

The usual converse call is two round trips: one Query reads the state and the
newest turns together, one transaction commits the turn. The names that other
packages use (the TTL attribute, the table name's pattern, sort keys) are
re-exported here, so that they need not know the split.
"""

from __future__ import annotations

from adapters.dynamodb_converse_commit import DynamoDBConverseCommit
from adapters.dynamodb_data import DynamoDBData
from adapters.dynamodb_erasure import DynamoDBErasure
from adapters.dynamodb_fold_commit import DynamoDBFoldCommit
from adapters.dynamodb_items import STATE_SK, TTL_ATTRIBUTE, TURN_PREFIX, turn_sort_key
from adapters.dynamodb_reads import DynamoDBReads
from adapters.dynamodb_recall_index import DynamoDBRecallIndex
from adapters.dynamodb_table import TABLE_NAME_PATTERN, DynamoDBClient

__all__ = [
    "STATE_SK",
    "TABLE_NAME_PATTERN",
    "TTL_ATTRIBUTE",
    "TURN_PREFIX",
    "DynamoDBClient",
    "DynamoDBConversationStore",
    "turn_sort_key",
]


class DynamoDBConversationStore(
    DynamoDBReads,
    DynamoDBConverseCommit,
    DynamoDBFoldCommit,
    DynamoDBData,
    DynamoDBErasure,
    DynamoDBRecallIndex,
):
    """The store: made with the client, the table's name, the turn retention and a clock.

    The retention bounds how long the memory a compaction wrote is kept
    (`FOLD#<version>`, twice the retention); the clock (seconds, as `time.time`) is
    what TTLs are set from and checked against.
    """
