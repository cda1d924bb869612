"""Write units per converse call and per reply, with the contacts index and without it.

SPEC section 10: listing contacts must not add a write to every converse call.
The contacts index (`adapters.contacts_index`) is a sparse KEYS_ONLY global
secondary index whose keys, `contactsShard` and `contactId`, are set on the
conversation's state item once, when the conversation starts; a reply sets
them only `if_not_exists`. The same change gave each message-id marker a
`recordedAt` (the erase fence compares it). This figure bills what a real
conversation writes, with those attributes and with them stripped, side by side.

How. A conversation goes through the real converse handler under moto
(in-process `mock_aws`, the table `local.aws_resources.create_table` makes,
index included): `exchanges` exchanges, each a converse call and the agent's
reply, twenty a day (under the default cap of 25, and a day apart, past the
idle reset, so every call is answered by the model), and the compactor run on
its queue after each exchange, as its event source mapping would. A
`provide-client-params.dynamodb` hook on the handler's and the compactor's
clients sees every write request; for each item it writes, a second client
(no hooks) reads the item with a consistent GetItem before the call and again
after it (`after-call.dynamodb`). Each item is then billed by DynamoDB's rules
(`bill`): on the table, and on the index when an index entry is created,
changed or removed. The "before" bill is the same writes with what the change
added stripped from both images (`without_the_change`) before billing.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import statistics
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from adapters.contacts_index import CONTACT_ID_ATTRIBUTE, CONTACTS_SHARD_ATTRIBUTE
from adapters.dynamodb_items import MARKER_PREFIX, RECORDED_AT, STATE_SK, Item
from bench.common import derived_rng
from bench.conversations import conversation
from bench.dynamodb_reads import converse, handler_under_moto, reply
from local.compaction_poller import CompactionPoller

KB = 1024
INDEX_ENTRY_OVERHEAD = 100
"""Bytes DynamoDB adds to every index entry it bills (and stores)."""
TABLE_KEYS = ("PK", "SK")
INDEX_KEYS = (CONTACTS_SHARD_ATTRIBUTE, CONTACT_ID_ATTRIBUTE)
EXCHANGES_A_DAY = 20
"""Under the default turn cap (25 contact messages a streak), so the model answers each."""
DAY_GAP = timedelta(hours=25)
"""Between the first exchanges of two days: past the default idle reset (24 hours)."""
COMPACTOR_MODULE = "compactor.handler"
PHASES = ("converse", "reply", "compaction")


# -- DynamoDB's billing rules ----------------------------------------------------------


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size in bytes, as DynamoDB bills it.

    The rules of "DynamoDB item sizes and formats" (Amazon DynamoDB Developer
    Guide, CapacityUnitCalculations.html): an item is the sum of its attributes,
    each the UTF-8 length of its name plus the size of its value (`value_size`).
    """
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def value_size(value: Mapping[str, Any]) -> int:
    """An attribute value's size in bytes, in the low-level client's shape (`{"S": ...}`).

    - string: its UTF-8 bytes; binary: its raw bytes;
    - number: about 1 byte per two significant digits, plus 1 (`number_size`);
    - null and Boolean: 1 byte;
    - list and map: 3 bytes whatever they hold, plus each element's size and 1
      byte of overhead per element (a map's element also counts its name's bytes);
    - sets: the sum of their elements' sizes.
    """
    ((kind, content),) = value.items()
    if kind not in _SIZERS:
        raise ValueError(f"unknown attribute type {kind!r}")
    return _SIZERS[kind](content)


def number_size(text: str) -> int:
    """A number's bytes: leading and trailing zeros trimmed, ceil(significant digits / 2) + 1."""
    mantissa = text.strip().lstrip("+-").lower().split("e")[0].replace(".", "")
    digits = len(mantissa.strip("0")) or 1
    return (digits + 1) // 2 + 1


_SIZERS: dict[str, Callable[[Any], int]] = {
    "S": lambda text: len(text.encode()),
    "N": number_size,
    "B": len,
    "BOOL": lambda _: 1,
    "NULL": lambda _: 1,
    "L": lambda elements: 3 + sum(1 + value_size(element) for element in elements),
    "M": lambda elements: (
        3 + sum(1 + len(name.encode()) + value_size(value) for name, value in elements.items())
    ),
    "SS": lambda elements: sum(len(element.encode()) for element in elements),
    "NS": lambda elements: sum(number_size(element) for element in elements),
    "BS": lambda elements: sum(len(element) for element in elements),
}


def write_units_for(size: int, *, transactional: bool) -> int:
    """1 WRU per started KB (at least one), twice that in a TransactWriteItems."""
    units = max(1, math.ceil(size / KB))
    return 2 * units if transactional else units


def index_entry(item: Item | None) -> Item | None:
    """The item's KEYS_ONLY entry in the contacts index, or None when it is not in it.

    The index is sparse: only an item with both of its keys has an entry, and the
    entry holds the table's keys and the index's keys, nothing else.
    """
    if item is None or not all(name in item for name in INDEX_KEYS):
        return None
    return {name: item[name] for name in (*TABLE_KEYS, *INDEX_KEYS)}


def index_entry_units(entry: Item) -> int:
    """1 WRU per started KB of the entry: its keys and DynamoDB's 100 bytes of overhead."""
    return math.ceil((item_size(entry) + INDEX_ENTRY_OVERHEAD) / KB)


@dataclass(frozen=True)
class Write:
    """One item a write request touched: the item before the call and after it (None: absent)."""

    operation: str
    """`Put`, `Update` or `Delete`."""
    transactional: bool
    before: Item | None
    after: Item | None


@dataclass(frozen=True)
class Bill:
    table: int
    index: int
    index_writes: int

    @property
    def total(self) -> int:
        return self.table + self.index


def bill(write: Write) -> Bill:
    """The write units DynamoDB bills for one item written, on the table and on the index.

    The table: a put or an update is billed on the larger of the item before and
    after (a refused write leaves them the same, and is billed on the item as it
    was, at least 1 WRU); a delete on the item deleted. The index: nothing when the
    item's index keys are unchanged (KEYS_ONLY: no other attribute is projected);
    a put of the entry when they appear, a delete when they go, both when they change.
    """
    before = item_size(write.before) if write.before else 0
    after = item_size(write.after) if write.after else 0
    size = before if write.operation == "Delete" else max(before, after)
    table = write_units_for(size, transactional=write.transactional)
    old, new = index_entry(write.before), index_entry(write.after)
    entries = [] if old == new else [entry for entry in (old, new) if entry is not None]
    return Bill(table, sum(index_entry_units(entry) for entry in entries), len(entries))


def without_the_change(item: Item | None) -> Item | None:
    """The item as it was before the contacts index: no index keys, no marker `recordedAt`."""
    if item is None:
        return None
    dropped = set(INDEX_KEYS)
    if item["SK"]["S"].startswith(MARKER_PREFIX):
        dropped.add(RECORDED_AT)
    return {name: value for name, value in item.items() if name not in dropped}


def as_before(write: Write) -> Write:
    return replace(
        write, before=without_the_change(write.before), after=without_the_change(write.after)
    )


# -- capturing the writes ----------------------------------------------------------------


def _key_of(item: Mapping[str, Any]) -> Item:
    return {name: item[name] for name in TABLE_KEYS}


def written_items(operation: str, params: Mapping[str, Any]) -> list[tuple[str, bool, str, Item]]:
    """The items a request writes: (operation, transactional, table, key) for each.

    A transaction's ConditionCheck writes nothing (it is billed as a read).
    """
    if operation == "PutItem":
        return [("Put", False, params["TableName"], _key_of(params["Item"]))]
    if operation == "UpdateItem":
        return [("Update", False, params["TableName"], params["Key"])]
    if operation == "DeleteItem":
        return [("Delete", False, params["TableName"], params["Key"])]
    if operation == "BatchWriteItem":
        return [
            ("Put", False, table, _key_of(request["PutRequest"]["Item"]))
            if "PutRequest" in request
            else ("Delete", False, table, request["DeleteRequest"]["Key"])
            for table, requests in params["RequestItems"].items()
            for request in requests
        ]
    if operation == "TransactWriteItems":
        written = []
        for entry in params["TransactItems"]:
            for kind in ("Put", "Update", "Delete"):
                if kind in entry:
                    part = entry[kind]
                    key = _key_of(part["Item"]) if kind == "Put" else part["Key"]
                    written.append((kind, True, part["TableName"], key))
        return written
    return []


@dataclass
class WriteRecorder:
    """Every item written through the hooked clients, with its images, by phase and call.

    `reader` must be a client without the hooks: it reads each item before and
    after the call (consistent GetItem), which is what the bill is made from.
    """

    reader: Any
    phase: str = "setup"
    call: int = 0
    writes: list[tuple[str, int, Write]] = field(default_factory=list)
    requests: int = 0
    refused: int = 0
    _pending: list[tuple[str, bool, str, Item, Item | None]] | None = None

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("provide-client-params.dynamodb", self._before_call)
        events.register("after-call.dynamodb", self._after_call)

    def start(self, phase: str) -> None:
        self.phase = phase
        self.call += 1

    def _read(self, table: str, key: Item) -> Item | None:
        item: Item | None = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get(
            "Item"
        )
        return item

    def _before_call(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        written = written_items(str(model.name), params)
        self._pending = [
            (operation, transactional, table, key, self._read(table, key))
            for operation, transactional, table, key in written
        ] or None

    def _after_call(self, http_response: Any, **_: Any) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        self.requests += 1
        if http_response.status_code != 200:
            self.refused += 1
        for operation, transactional, table, key, before in pending:
            after = self._read(table, key)
            self.writes.append(
                (self.phase, self.call, Write(operation, transactional, before, after))
            )


# -- the conversation ------------------------------------------------------------------


@contextlib.contextmanager
def compactor_module() -> Iterator[ModuleType]:
    """The compactor Lambda's module imported fresh, inside `handler_under_moto`'s world."""
    sys.modules.pop(COMPACTOR_MODULE, None)
    try:
        yield importlib.import_module(COMPACTOR_MODULE)
    finally:
        sys.modules.pop(COMPACTOR_MODULE, None)


def exchange_times(exchanges: int, now: datetime) -> list[datetime]:
    """When each exchange's contact message was sent: a day's twenty two minutes apart."""
    days = math.ceil(exchanges / EXCHANGES_A_DAY)
    start = now - days * DAY_GAP - timedelta(hours=2)
    return [
        start + (n // EXCHANGES_A_DAY) * DAY_GAP + (n % EXCHANGES_A_DAY) * timedelta(minutes=2)
        for n in range(exchanges)
    ]


def record_conversation(exchanges: int, contact: str = "write-units") -> tuple[WriteRecorder, int]:
    """The writes of a conversation through the handler (and the compactor), and its folds."""
    messages = conversation(derived_rng("write-units"), 2 * exchanges)
    now = datetime.now(UTC).replace(microsecond=0)
    with handler_under_moto() as (handler, dynamodb, sqs), compactor_module() as compactor:
        recorder = WriteRecorder(reader=dynamodb)
        recorder.attach(handler.SERVICE._store._client)
        recorder.attach(compactor.STORE._client)
        poller = CompactionPoller(
            sqs, os.environ["COMPACTION_QUEUE_URL"], compactor.lambda_handler, threading.Lock()
        )
        for n, sent_at in enumerate(exchange_times(exchanges, now)):
            recorder.start("converse")
            converse(handler, contact, messages[2 * n].text, sent_at)
            recorder.start("reply")
            reply(handler, contact, messages[2 * n + 1].text, sent_at + timedelta(minutes=1))
            recorder.start("compaction")
            while poller.poll_once():
                pass
    return recorder, poller.batches


# -- the figure --------------------------------------------------------------------------


def _per(total: int, count: int) -> float:
    return round(total / count, 3) if count else 0.0


def _tally(
    writes: list[tuple[str, int, Write]], change: Callable[[Write], Write], calls: int, phase: str
) -> dict[str, Any]:
    bills = [bill(change(write)) for kind, _, write in writes if kind == phase]
    table = sum(b.table for b in bills)
    index = sum(b.index for b in bills)
    return {
        "wru": _per(table + index, calls),
        "table_wru": _per(table, calls),
        "gsi_wru": _per(index, calls),
        "gsi_writes": sum(b.index_writes for b in bills),
    }


def _per_call(writes: list[tuple[str, int, Write]], phase: str, before: bool) -> dict[int, int]:
    totals: dict[int, int] = {}
    for kind, call, write in writes:
        if kind == phase:
            billed = bill(as_before(write) if before else write)
            totals[call] = totals.get(call, 0) + billed.total
    return totals


def _median_bytes(
    writes: list[tuple[str, int, Write]], chosen: Callable[[Item], bool], before: bool
) -> int:
    sizes = [
        item_size((without_the_change(write.after) if before else write.after) or {})
        for kind, _, write in writes
        if kind == "converse" and write.after is not None and chosen(write.after)
    ]
    return int(statistics.median(sizes)) if sizes else 0


def figures(recorder: WriteRecorder, exchanges: int, compactions: int) -> dict[str, Any]:
    """The section of results.json, from the writes recorded."""
    counts = {"converse": exchanges, "reply": exchanges, "compaction": compactions}
    identity: Callable[[Write], Write] = lambda write: write  # noqa: E731
    after = {phase: _tally(recorder.writes, identity, counts[phase], phase) for phase in PHASES}
    before = {phase: _tally(recorder.writes, as_before, counts[phase], phase) for phase in PHASES}
    converse_after = _per_call(recorder.writes, "converse", before=False)
    converse_before = _per_call(recorder.writes, "converse", before=True)

    def state(item: Item) -> bool:
        return bool(item["SK"]["S"] == STATE_SK)

    def marker(item: Item) -> bool:
        return str(item["SK"]["S"]).startswith(MARKER_PREFIX)

    return {
        "exchanges": exchanges,
        "compactions": compactions,
        "wru_per_converse": after["converse"]["wru"],
        "table_wru_per_converse": after["converse"]["table_wru"],
        "gsi_wru_per_converse": after["converse"]["gsi_wru"],
        "wru_per_reply": after["reply"]["wru"],
        "gsi_wru_per_reply": after["reply"]["gsi_wru"],
        "wru_per_compaction": after["compaction"]["wru"],
        "gsi_writes": sum(after[phase]["gsi_writes"] for phase in PHASES),
        "before": {
            "wru_per_converse": before["converse"]["wru"],
            "table_wru_per_converse": before["converse"]["table_wru"],
            "gsi_wru_per_converse": before["converse"]["gsi_wru"],
            "wru_per_reply": before["reply"]["wru"],
            "wru_per_compaction": before["compaction"]["wru"],
            "state_item_bytes_median": _median_bytes(recorder.writes, state, before=True),
            "marker_item_bytes_median": _median_bytes(recorder.writes, marker, before=True),
        },
        "added_wru_per_converse": round(after["converse"]["wru"] - before["converse"]["wru"], 3),
        "added_table_wru_per_converse": round(
            after["converse"]["table_wru"] - before["converse"]["table_wru"], 3
        ),
        "added_wru_per_reply": round(after["reply"]["wru"] - before["reply"]["wru"], 3),
        "converse_calls_costing_more": sum(
            1 for call, units in converse_after.items() if units > converse_before.get(call, 0)
        ),
        "state_item_bytes_median": _median_bytes(recorder.writes, state, before=False),
        "marker_item_bytes_median": _median_bytes(recorder.writes, marker, before=False),
        "write_requests": recorder.requests,
        "refused_write_requests": recorder.refused,
    }


def run(exchanges: int = 200) -> dict[str, Any]:
    """`write_units` in results.json: a conversation's writes billed, after and before."""
    recorder, compactions = record_conversation(exchanges)
    return figures(recorder, exchanges, compactions)
