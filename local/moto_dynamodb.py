"""Four fixes to moto 5.2.5's DynamoDB, so the emulation holds a long session flat.

1. **Every model instance is kept forever.** moto's `BaseModel.__new__` appends
   each instance to its class's `instances_tracked` (for moto's dashboard), and
   DynamoDB makes instances all the time: each `Item` written, each copy of an
   item a query or an update returns, and, in `transact_write_items`, a deep
   copy of every table a transaction touches, once per item. None is ever
   released, so memory grows with every call, and with the table's size on
   every transaction. DynamoDB's models are created untracked here.
2. **A transaction copies whole tables.** `transact_write_items` deep-copies
   each table it touches, once per item, to roll back on failure: the cost of a
   write grows with the table. The version here snapshots only the items the
   transaction touches and puts them back on failure. Everything else, the
   checks, their order, the errors and the all-or-nothing outcome, is moto's
   own code, unchanged.
3. **A query sorts the whole table.** A query on the table's own key gathers
   `all_items()`, every item of every partition sorted, then keeps the
   partition asked for: each read grows with the table. Here that query
   gathers its partition only; the results, their order and their pages are
   the same.
4. **A query compares its whole partition.** moto then sorts every item of the
   partition and tests each against the sort-key condition, in Python objects
   whose every comparison allocates: a query of ten items from a conversation
   of 5,000 turns takes a quarter of a second, where DynamoDB reads the range
   it was asked for. Here the partition's string sort keys are sorted as plain
   strings (which order as DynamoDB's UTF-8 bytes do), kept until the table's
   next write, and the run meeting the condition found by bisection; that run
   and one item on either side are what moto tests. moto's own test still runs
   on them, so the results, their order and their pages are the same.

`install()` applies all four, once per process: the local runner's
emulation and the in-process `mock_aws` of the tests and the benchmarks use
the same moto. docs/decisions.md says how each belongs upstream.
"""

from __future__ import annotations

import copy
import inspect
import threading
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from moto.core.model_instances import model_data
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import Table

ItemKey = tuple[str, str]
# (table name, the key spelled out) -> (the key, the item's attributes before or None)
Snapshot = dict[ItemKey, tuple[dict[str, Any], dict[str, Any] | None]]

# moto's own, kept for the tests that hold the two to the same outcomes.
MOTO_TRANSACT_WRITE_ITEMS = DynamoDBBackend.transact_write_items
MOTO_QUERY = Table.query
MOTO_ALL_ITEMS = Table.all_items
MOTO_PUT_ITEM = Table.put_item
MOTO_DELETE_ITEM = Table.delete_item
_QUERY_SIGNATURE = inspect.signature(Table.query)
# The table, the partition and the sort-key condition of the base-table query this
# thread runs, while it runs.
_querying = threading.local()

# moto's names of the key conditions, each as the run of sorted string keys meeting it:
# (sorted keys, bounds) -> the run's first index and the index after its last.
_RUNS: dict[str, Callable[[list[str], list[str]], tuple[int, int]]] = {
    "EQ": lambda keys, b: (bisect_left(keys, b[0]), bisect_right(keys, b[0])),
    "LT": lambda keys, b: (0, bisect_left(keys, b[0])),
    "LE": lambda keys, b: (0, bisect_right(keys, b[0])),
    "GT": lambda keys, b: (bisect_right(keys, b[0]), len(keys)),
    "GE": lambda keys, b: (bisect_left(keys, b[0]), len(keys)),
    "BETWEEN": lambda keys, b: (bisect_left(keys, b[0]), bisect_right(keys, b[1])),
    "BEGINS_WITH": lambda keys, b: _prefixed(keys, b[0]),
}


def _prefixed(keys: list[str], prefix: str) -> tuple[int, int]:
    start = end = bisect_left(keys, prefix)
    while end < len(keys) and keys[end].startswith(prefix):
        end += 1
    return start, end


def install() -> None:
    if DynamoDBBackend.transact_write_items is transact_write_items:
        return
    # Importing moto.dynamodb.models has defined every DynamoDB model class.
    for model in model_data["dynamodb"].values():
        model.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    Table.put_item = put_item  # type: ignore[method-assign]
    Table.delete_item = delete_item  # type: ignore[method-assign]


def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    return object.__new__(cls)


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto's `transact_write_items`, rolling back the items it touched, not whole tables."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    # The items as they were, in case any of the operations fails.
    before = _snapshot(self, transact_items)
    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors: list[tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]] = []
    for item in transact_items:
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            _write_one(self, item, check_unicity)
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            _restore(self, before)
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), getattr(e, "item", None)))
        except Exception as e:
            errors.append((type(e).__name__, str(e), None))

    if any(code is not None for code, _, _ in errors):
        _restore(self, before)
        raise TransactionCanceledException(errors)


class _ConditionFailed(ConditionalCheckFailed):
    """moto's refusal, keeping the item it reports (`ReturnValuesOnConditionCheckFailure`)."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__(item=item)
        self.item = item


def _write_one(
    self: DynamoDBBackend, item: dict[str, Any], check_unicity: Callable[[str, Any], None]
) -> None:
    """One operation of the transaction, as moto's loop body writes it."""
    op_type, op = next(iter(item.items()))
    if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
        raise ValueError("Unsupported transaction operation")

    table_name = op["TableName"]
    condition_expression = op.get("ConditionExpression")
    expression_attribute_names = op.get("ExpressionAttributeNames")
    expression_attribute_values = op.get("ExpressionAttributeValues")
    return_values_on_condition_check_failure = op.get("ReturnValuesOnConditionCheckFailure")

    if op_type == "Put":
        attrs = op["Item"]
        table = self.get_table(table_name)
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
    else:
        key = op["Key"]

    check_unicity(table_name, key)

    current = self.get_item(table_name, key)
    if condition_expression is not None:
        condition_op = get_filter_expression(
            condition_expression, expression_attribute_names, expression_attribute_values
        )
        if not condition_op.expr(current):
            original_item = None
            if return_values_on_condition_check_failure == "ALL_OLD" and current:
                original_item = current.to_json()["Attributes"]
            raise _ConditionFailed(original_item)

    if op_type == "Put":
        self.put_item(
            table_name,
            op["Item"],
            condition_expression=condition_expression,
            expression_attribute_names=expression_attribute_names,
            expression_attribute_values=expression_attribute_values,
        )
    elif op_type == "Delete":
        self.delete_item(
            table_name,
            key,
            condition_expression=condition_expression,
            expression_attribute_names=expression_attribute_names,
            expression_attribute_values=expression_attribute_values,
        )
    elif op_type == "Update":
        self.update_item(
            table_name,
            key,
            update_expression=op["UpdateExpression"],
            condition_expression=condition_expression,
            expression_attribute_names=expression_attribute_names,
            expression_attribute_values=expression_attribute_values,
        )


def _snapshot(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> Snapshot:
    """Each item the operations name, as it is now (None: absent), by table and key."""
    before: Snapshot = {}
    for item in transact_items:
        for op_type, op in item.items():
            key = _key_of(backend, op_type, op)
            if key is None:
                continue  # the operation fails on its own, before writing anything
            table_name = op["TableName"]
            current = backend.get_item(table_name, key)
            attributes = copy.deepcopy(current.to_json()["Attributes"]) if current else None
            before.setdefault((table_name, repr(sorted(key.items()))), (key, attributes))
    return before


def _key_of(backend: DynamoDBBackend, op_type: str, op: Any) -> dict[str, Any] | None:
    try:
        table = backend.get_table(op["TableName"])
        if op_type != "Put":
            return dict(op["Key"])
        attrs = op["Item"]
        key = {table.hash_key_attr: attrs[table.hash_key_attr]}
        if table.range_key_attr is not None:
            key[table.range_key_attr] = attrs[table.range_key_attr]
        return key
    except Exception:  # no table, no key: moto's own loop reports it
        return None


def _restore(backend: DynamoDBBackend, before: Snapshot) -> None:
    for (table_name, _), (key, attributes) in before.items():
        if attributes is None:
            if backend.get_item(table_name, key) is not None:
                backend.delete_item(table_name, key)
        else:
            backend.put_item(table_name, attributes)


def query(self: Table, *args: Any, **kwargs: Any) -> tuple[list[Item], int, dict[str, Any] | None]:
    """moto's query, told which partition a query on the table's own key reads."""
    arguments = _QUERY_SIGNATURE.bind(self, *args, **kwargs).arguments
    hash_key = arguments.get("hash_key")
    if arguments.get("index_name") or hash_key is None or not self.range_key_attr:
        return MOTO_QUERY(self, *args, **kwargs)
    _querying.partition = (self, hash_key)
    _querying.sort_key_run = _sort_key_run(
        self, arguments.get("range_comparison"), arguments.get("range_objs") or []
    )
    try:
        return MOTO_QUERY(self, *args, **kwargs)
    finally:
        _querying.partition = _querying.sort_key_run = None


def _sort_key_run(
    table: Table, comparison: str | None, bounds: list[Any]
) -> Callable[[list[str]], tuple[int, int]] | None:
    """The condition as the run of a partition's sorted string keys it takes; None when
    there is none to narrow by (no condition, or not strings: moto alone tests those)."""
    run = _RUNS.get(comparison or "")
    if run is None or table.range_key_type != "S" or any(b.type != "S" for b in bounds):
        return None
    values = [str(bound.value) for bound in bounds]
    return lambda keys: run(keys, values)


def all_items(self: Table) -> list[Item]:
    """moto's `all_items`; for a base-table query, the items of its partition alone.

    moto keeps, of all items, those whose hash key is the query's, then sorts them
    by range key: the partition's items, sorted the same way, are that list. With a
    condition on a string sort key, only the run of items meeting it can be in the
    answer (moto tests them again), and one item on either side of the run: moto
    ends a page that reached its `Limit` when it meets the next item, so the pages
    end where moto's do.
    """
    partition = getattr(_querying, "partition", None)
    if partition is None or partition[0] is not self:
        return MOTO_ALL_ITEMS(self)
    items = self.items.get(partition[1], {})
    narrow = getattr(_querying, "sort_key_run", None)
    if narrow is None:
        return sorted(items.values(), key=_range_key)
    values, keys = _string_order(self, partition[1], items)
    start, end = narrow(values)
    if start >= end:
        return []
    return [items[key] for key in keys[max(start - 1, 0) : end + 1]]


# A partition's string sort keys in order, kept until the table's next put or delete:
# the table -> {the hash key -> (the partition's dict, its keys' values, its keys)}.
_ORDERS: weakref.WeakKeyDictionary[Table, dict[Any, tuple[dict[Any, Item], list[str], list[Any]]]]
_ORDERS = weakref.WeakKeyDictionary()


def _string_order(
    table: Table, hash_key: Any, items: dict[Any, Item]
) -> tuple[list[str], list[Any]]:
    """The partition's sort keys as plain strings, in order (they order as moto's
    `DynamoType`s of type S do), with the keys themselves: sorted once, read until a
    write to the table."""
    orders = _ORDERS.setdefault(table, {})
    kept = orders.get(hash_key)
    if kept is not None and kept[0] is items:
        return kept[1], kept[2]
    ordered = sorted((key.value, key) for key in items)
    values, keys = [value for value, _ in ordered], [key for _, key in ordered]
    orders[hash_key] = (items, values, keys)
    return values, keys


def put_item(self: Table, *args: Any, **kwargs: Any) -> Item:
    """moto's `put_item`; the table's kept key orders are dropped."""
    try:
        return MOTO_PUT_ITEM(self, *args, **kwargs)
    finally:
        _ORDERS.pop(self, None)


def delete_item(self: Table, *args: Any, **kwargs: Any) -> Item | None:
    """moto's `delete_item`; the table's kept key orders are dropped."""
    try:
        return MOTO_DELETE_ITEM(self, *args, **kwargs)
    finally:
        _ORDERS.pop(self, None)


def _range_key(item: Item) -> Any:
    """moto's own order of range keys (`DynamoType`'s comparisons)."""
    return item.range_key
