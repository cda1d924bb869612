"""A conversation's data read back: its turns as recorded, and a tenant's contacts, in pages.

The export reads the turns oldest first from where the last page stopped, and
leaves out what no one may read: turns past their TTL (DynamoDB deletes them
days late) and turns an erase fenced off (their deletion may still be going
on). The contacts come from the sparse contacts index (`adapters.contacts_index`),
shard after shard, and each page's `lastMessageAt` from its states, read in batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from adapters.contacts_index import (
    CONTACT_ID_ATTRIBUTE,
    CONTACTS_INDEX,
    CONTACTS_SHARD_ATTRIBUTE,
    CONTACTS_SHARDS,
)
from adapters.conversation_store import (
    ContactEntry,
    ContactsPage,
    ContactsPosition,
    ConversationKey,
    StoredTurn,
    TurnsPage,
    parse_instant,
)
from adapters.dynamodb_items import (
    STATE_SK,
    TTL_ATTRIBUTE,
    TURN_PREFIX,
    TURNS_END,
    Item,
    contacts_shard,
    erased_through,
    item_key,
    state_from,
    stored_from,
    turn_sort_key,
)
from adapters.dynamodb_reads import BATCH_GET_LIMIT
from adapters.dynamodb_table import DynamoDBTable
from memory_core.history_range import is_expired
from memory_core.turns import TurnPosition


class DynamoDBData(DynamoDBTable):
    def turns_page(self, key: ConversationKey, after: TurnPosition | None, limit: int) -> TurnsPage:
        """Up to `limit` turns after `after` (from the first without), oldest first.

        One more is looked for, so that a page that ends the conversation says so
        (`last` None) and no caller asks for an empty page after it.
        """
        state_item = self._read_item(key.partition, STATE_SK)
        state = state_from(state_item) if state_item else None
        fence = state.erased_at if state else None
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :first AND :turns_end",
            "ExpressionAttributeValues": {
                ":pk": {"S": key.partition},
                ":first": {"S": TURN_PREFIX},
                ":turns_end": {"S": TURNS_END},
            },
            "ConsistentRead": True,
            "Limit": limit + 1,
        }
        start = max(
            turn_sort_key(after) if after else "",
            erased_through(fence) if fence else "",
        )
        if start:
            # Nothing at or before the fence is read: the deletion may not have got there yet.
            request["ExclusiveStartKey"] = item_key(key.partition, start)
        now = self._now()
        found: list[StoredTurn] = []
        while len(found) <= limit:
            response = self._client.query(**request)
            for item in response.get("Items", []):
                if is_expired(int(item[TTL_ATTRIBUTE]["N"]), now):
                    continue  # DynamoDB deletes lazily, days late: never served
                found.append(stored_from(item, now))
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        more = len(found) > limit
        page = found[:limit]
        anything = bool(page) or (state is not None and not state.holds_nothing)
        return TurnsPage(page, page[-1].turn.position if more else None, anything)

    def contacts_page(
        self, tenant_id: str, after: ContactsPosition | None, limit: int
    ) -> ContactsPage:
        """Up to `limit` of the tenant's listed contacts, shard by shard, from after `after`."""
        listed: list[tuple[int, str]] = []
        first_shard = after.shard if after else 0
        for shard in range(first_shard, CONTACTS_SHARDS):
            start = after.contact_id if after and shard == after.shard else None
            listed += [
                (shard, c)
                for c in self._shard_contacts(tenant_id, shard, start, limit + 1 - len(listed))
            ]
            if len(listed) > limit:
                break
        more = len(listed) > limit
        page = listed[:limit]
        states = self._listed_states(tenant_id, [contact for _, contact in page])
        # The index is eventually consistent: a contact erased a moment ago may still be in
        # it, but its state no longer carries the index's keys.
        contacts = [
            ContactEntry(contact, _last_contact_at(states[contact]))
            for _, contact in page
            if contact in states
        ]
        last = ContactsPosition(*page[-1]) if more else None
        return ContactsPage(contacts, last)

    def _shard_contacts(
        self, tenant_id: str, shard: int, after: str | None, limit: int
    ) -> list[str]:
        condition = "#shard = :shard"
        names = {"#shard": CONTACTS_SHARD_ATTRIBUTE}
        values: dict[str, Any] = {":shard": {"S": contacts_shard(tenant_id, shard)}}
        if after is not None:
            condition += " AND #contact > :after"
            names["#contact"] = CONTACT_ID_ATTRIBUTE  # DynamoDB refuses a name left unused
            values[":after"] = {"S": after}
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": CONTACTS_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "Limit": limit,
        }
        found: list[str] = []
        while len(found) < limit:
            response = self._client.query(**request)
            found += [item[CONTACT_ID_ATTRIBUTE]["S"] for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found[:limit]

    def _listed_states(self, tenant_id: str, contact_ids: list[str]) -> dict[str, Item]:
        """The states of these contacts that are still listed, by contact id."""
        keys = [
            item_key(ConversationKey(tenant_id, contact).partition, STATE_SK)
            for contact in contact_ids
        ]
        found: dict[str, Item] = {}
        for start in range(0, len(keys), BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                self._table: {
                    "Keys": keys[start : start + BATCH_GET_LIMIT],
                    "ConsistentRead": True,
                    "ProjectionExpression": "#contact, lastContactAt",
                    "ExpressionAttributeNames": {"#contact": CONTACT_ID_ATTRIBUTE},
                }
            }
            while request:
                response = self._client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    if CONTACT_ID_ATTRIBUTE in item:
                        found[item[CONTACT_ID_ATTRIBUTE]["S"]] = item
                request = response.get("UnprocessedKeys") or {}
        return found


def _last_contact_at(item: Mapping[str, Any]) -> datetime | None:
    value = item.get("lastContactAt")
    return parse_instant(value["S"]) if value else None
