"""Recall's index segments (`memory_core.recall_index`) as items of the conversation's partition.

| item | SK |
| --- | --- |
| a segment, or one part of it | `RECALL#<level>#<first version>#<last version>#<part>` |

`RECALL#` sorts before every turn (`R` < `T`) and after the markers, so no
read of turns or markers meets a segment. A segment's body is one binary
attribute, zlib-compressed JSON: its turns (their sort keys without the
prefix, and lengths) and its postings. Compressed, a chat turn's counts take
about a hundred bytes. A reader queries each level from the top, for the
segments newer than the levels above (`live`): a few items, however long the
conversation. Segments are written after the fold committed, as plain puts
(the fold's own item, `FOLD#v`, is written the same way), and expire as the
kept memories do, twice the retention after they were written.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_items import (
    TTL_ATTRIBUTE,
    TURN_PREFIX,
    Item,
    item_key,
    position_of,
    turn_sort_key,
)
from adapters.dynamodb_table import DynamoDBTable
from memory_core.erasure import erased
from memory_core.history_range import expires_at
from memory_core.recall_index import (
    TOP_LEVEL,
    Segment,
    SegmentName,
    merge_due,
    merged,
    merged_name,
    segment_of,
    split,
)
from memory_core.turns import Turn, TurnPosition

RECALL_PREFIX = "RECALL#"
VERSION_DIGITS = 12
BODY_ATTRIBUTE = "segment"
SEGMENT_MAX_BYTES = 350 * 1024
"""A part's compressed body at most: under DynamoDB's 400 KB item limit with its keys."""
MAX_MERGES_PER_FOLD = TOP_LEVEL
"""A fold's merges cascade at most once a level."""


def segment_sort_key(name: SegmentName, part: int = 0) -> str:
    return (
        f"{RECALL_PREFIX}{name.level}#{name.first:0{VERSION_DIGITS}d}"
        f"#{name.last:0{VERSION_DIGITS}d}#{part:03d}"
    )


def segment_name_of(sort_key: str) -> SegmentName:
    level, first, last, _ = sort_key.removeprefix(RECALL_PREFIX).split("#")
    return SegmentName(int(level), int(first), int(last))


def last_version_of(sort_key: str) -> int:
    """The newest compaction a segment holds: an erase deletes it when that is before its fence."""
    return segment_name_of(sort_key).last


def encode(segment: Segment) -> bytes:
    body = {
        "turns": [
            [_sort_key_suffix(position), length]
            for position, length in zip(segment.positions, segment.lengths, strict=True)
        ],
        "postings": segment.postings,
    }
    return zlib.compress(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())


def decode(body: bytes) -> Segment:
    document = json.loads(zlib.decompress(body))
    turns = document["turns"]
    return Segment(
        tuple(position_of(TURN_PREFIX + suffix) for suffix, _ in turns),
        tuple(length for _, length in turns),
        document["postings"],
    )


def _sort_key_suffix(position: TurnPosition) -> str:
    return turn_sort_key(position).removeprefix(TURN_PREFIX)


def encoded_parts(segment: Segment) -> list[bytes]:
    """The segment's body, in as few parts as keep each under `SEGMENT_MAX_BYTES`."""
    parts = 1
    while True:
        bodies = (
            [encode(piece) for piece in split(segment, parts)]
            if segment.positions
            else [encode(segment)]
        )
        if all(len(body) <= SEGMENT_MAX_BYTES for body in bodies) or parts >= len(
            segment.positions
        ):
            return bodies
        parts *= 2


class DynamoDBRecallIndex(DynamoDBTable):
    def index_fold(
        self,
        key: ConversationKey,
        version: int,
        turns: Sequence[Turn],
        *,
        erased_at: datetime | None,
    ) -> None:
        """The segment of the turns a compaction folded under `version`, then the merges due."""
        self._put_segment(key, SegmentName(0, version, version), segment_of(turns))
        for _ in range(MAX_MERGES_PER_FOLD):
            due = merge_due(self._names(key))
            if due is None:
                return
            segments = self._read(key, due)
            # An erase's fence may have passed since some were written: their turns go.
            kept = merged(segments, lambda position: not erased(position, erased_at))
            self._put_segment(key, merged_name(due), kept)

    def live_segments(self, key: ConversationKey) -> list[Segment]:
        """Every segment a reader takes (each part apart): a few items, read level by level."""
        return [decode(item[BODY_ATTRIBUTE]["B"]) for _, item in self._query_levels(key, True)]

    def _names(self, key: ConversationKey) -> list[SegmentName]:
        return sorted({name for name, _ in self._query_levels(key, False)})

    def _read(self, key: ConversationKey, names: Sequence[SegmentName]) -> list[Segment]:
        """These segments (of one level, oldest first), every part: one Query of their range."""
        wanted = set(names)
        items = self._query(
            key,
            segment_sort_key(names[0]),
            segment_sort_key(names[-1], part=999),
            with_bodies=True,
        )
        return [
            decode(item[BODY_ATTRIBUTE]["B"])
            for item in items
            if segment_name_of(item["SK"]["S"]) in wanted
        ]

    def _query_levels(
        self, key: ConversationKey, with_bodies: bool
    ) -> list[tuple[SegmentName, Item]]:
        """The live segments' parts, from the top level down: at each level, those newer
        than every segment above (`memory_core.recall_index.live`).

        Parts are written last to first, so a segment whose part 0 is missing is a
        merge that did not finish: it is passed over, and what it merged stays live.
        """
        found: list[tuple[SegmentName, Item]] = []
        above = 0
        for level in range(TOP_LEVEL, -1, -1):
            items = self._query(
                key,
                f"{RECALL_PREFIX}{level}#{above + 1:0{VERSION_DIGITS}d}",
                f"{RECALL_PREFIX}{level}#~",
                with_bodies=with_bodies,
            )
            complete = {
                segment_name_of(item["SK"]["S"])
                for item in items
                if item["SK"]["S"].endswith(_FIRST_PART)
            }
            for item in items:
                name = segment_name_of(item["SK"]["S"])
                if name in complete:
                    found.append((name, item))
                    above = max(above, name.last)
        return found

    def _query(self, key: ConversationKey, low: str, high: str, *, with_bodies: bool) -> list[Item]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :low AND :high",
            "ExpressionAttributeValues": {
                ":pk": {"S": key.partition},
                ":low": {"S": low},
                ":high": {"S": high},
            },
            "ConsistentRead": True,
        }
        if not with_bodies:
            request["ProjectionExpression"] = "SK"
        items: list[Item] = []
        while True:
            response = self._client.query(**request)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return items
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _put_segment(self, key: ConversationKey, name: SegmentName, segment: Segment) -> None:
        ttl = {"N": str(expires_at(self._now(), 2 * self._retention_days))}
        bodies = encoded_parts(segment)
        # The last part first: a segment is read only once its part 0 stands.
        for part in reversed(range(len(bodies))):
            body = bodies[part]
            item = {
                **item_key(key.partition, segment_sort_key(name, part)),
                BODY_ATTRIBUTE: {"B": body},
                TTL_ATTRIBUTE: ttl,
            }
            self._client.put_item(TableName=self._table, Item=item)


_FIRST_PART = "#000"
