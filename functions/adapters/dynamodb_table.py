"""The conversation table as the store's parts share it: the client, the table, the clock.

`DynamoDBConversationStore` (adapters/dynamodb_store.py) is composed of the
reads and the two commits, each a subclass of `DynamoDBTable`; what more than
one of them needs is here: reading one item, and updating the state under a condition.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_items import STATE_SK, Item, item_key

TABLE_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
"""The characters DynamoDB allows in a table name."""


class DynamoDBClient(Protocol):
    """The part of botocore's DynamoDB client the store uses."""

    def query(self, **kwargs: Any) -> dict[str, Any]: ...
    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def put_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def delete_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]: ...


class DynamoDBTable:
    """The client and table every part goes through, and the clock TTLs are set and read by."""

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

    def _read_item(self, partition: str, sort_key: str) -> Item | None:
        """The item as last written (a consistent read), or None."""
        response = self._client.get_item(
            TableName=self._table,
            Key=item_key(partition, sort_key),
            ConsistentRead=True,
        )
        item: Item | None = response.get("Item")
        return item

    def _put(self, item: Item) -> dict[str, Any]:
        return {"TableName": self._table, "Item": item}

    def _update_state_if(
        self,
        key: ConversationKey,
        update: str,
        condition: str,
        values: dict[str, Any] | None = None,
    ) -> bool:
        """The state updated if `condition` holds; False (nothing written) if it does not."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": item_key(key.partition, STATE_SK),
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
