"""The emulation's DynamoDB fixes (`local/moto_dynamodb.py`): moto's outcomes, flat costs.

Every transaction is checked against moto's own `transact_write_items` on a
twin table: the same writes, the same errors, the same all-or-nothing result.
The costs are counted, not timed: the model instances alive and the memory
held after many transactions.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

from local import moto_dynamodb
from local.aws_resources import create_table
from tests.integration.conftest import use_fake_credentials

KEYS = ["a", "b", "c"]


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    use_fake_credentials(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb")
        for name in ("fixed", "moto"):
            create_table(client, name)  # the service's own table: the same keys, a TTL
        yield client


def put(table: str, sk: str, value: int, *, if_absent: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "TableName": table,
        "Item": {"PK": {"S": "c"}, "SK": {"S": sk}, "n": {"N": str(value)}},
    }
    if if_absent:
        operation["ConditionExpression"] = "attribute_not_exists(PK)"
    return {"Put": operation}


def add(table: str, sk: str, value: int, *, below: int | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "TableName": table,
        "Key": {"PK": {"S": "c"}, "SK": {"S": sk}},
        "UpdateExpression": "ADD n :v",
        "ExpressionAttributeValues": {":v": {"N": str(value)}},
    }
    if below is not None:
        operation["ConditionExpression"] = "attribute_not_exists(n) OR n < :limit"
        operation["ExpressionAttributeValues"][":limit"] = {"N": str(below)}
    return {"Update": operation}


def delete(table: str, sk: str) -> dict[str, Any]:
    return {"Delete": {"TableName": table, "Key": {"PK": {"S": "c"}, "SK": {"S": sk}}}}


def check(table: str, sk: str, present: bool) -> dict[str, Any]:
    condition = "attribute_exists(PK)" if present else "attribute_not_exists(PK)"
    key = {"PK": {"S": "c"}, "SK": {"S": sk}}
    return {"ConditionCheck": {"TableName": table, "Key": key, "ConditionExpression": condition}}


OPERATIONS = st.one_of(
    st.builds(
        lambda sk, v, c: ("put", sk, v, c), st.sampled_from(KEYS), st.integers(0, 9), st.booleans()
    ),
    st.builds(
        lambda sk, v, b: ("add", sk, v, b),
        st.sampled_from(KEYS),
        st.integers(1, 9),
        st.one_of(st.none(), st.integers(1, 12)),
    ),
    st.builds(lambda sk: ("delete", sk, 0, None), st.sampled_from(KEYS)),
    st.builds(lambda sk, p: ("check", sk, 0, p), st.sampled_from(KEYS), st.booleans()),
)


def operation(table: str, drawn: tuple[str, str, int, Any]) -> dict[str, Any]:
    kind, sk, value, option = drawn
    if kind == "put":
        return put(table, sk, value, if_absent=option)
    if kind == "add":
        return add(table, sk, value, below=option)
    if kind == "delete":
        return delete(table, sk)
    return check(table, sk, option)


def outcome(client: Any, table: str, transaction: list[Any]) -> tuple[str, list[str]]:
    try:
        client.transact_write_items(TransactItems=[operation(table, op) for op in transaction])
    except ClientError as error:
        reasons = error.response.get("CancellationReasons", [])
        return error.response["Error"]["Code"], [r.get("Code", "") for r in reasons]
    return "ok", []


def contents(client: Any, table: str) -> list[dict[str, Any]]:
    items = client.scan(TableName=table)["Items"]
    return sorted(items, key=lambda item: item["SK"]["S"])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(OPERATIONS, min_size=1, max_size=4), min_size=1, max_size=8))
def test_every_transaction_ends_as_under_motos_own_code(dynamodb, transactions):
    client = dynamodb  # one emulation for every example: each starts from empty tables
    for table in ("fixed", "moto"):
        for item in client.scan(TableName=table)["Items"]:
            client.delete_item(TableName=table, Key={"PK": item["PK"], "SK": item["SK"]})
    for transaction in transactions:
        fixed = outcome(client, "fixed", transaction)
        with motos_own_transactions():
            original = outcome(client, "moto", transaction)
        assert fixed == original
        assert contents(client, "fixed") == contents(client, "moto")


class motos_own_transactions:
    """moto's `transact_write_items` for the duration of a `with`."""

    def __enter__(self) -> None:
        self.fixed = DynamoDBBackend.transact_write_items
        DynamoDBBackend.transact_write_items = moto_dynamodb.MOTO_TRANSACT_WRITE_ITEMS  # type: ignore[method-assign]

    def __exit__(self, *_: object) -> None:
        DynamoDBBackend.transact_write_items = self.fixed  # type: ignore[method-assign]


def test_a_failed_condition_puts_back_what_the_earlier_operations_wrote(dynamodb):
    dynamodb.transact_write_items(TransactItems=[put("fixed", "a", 1), add("fixed", "b", 5)])
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(
            TransactItems=[
                put("fixed", "new", 7),
                add("fixed", "a", 1),
                delete("fixed", "b"),
                check("fixed", "missing", present=True),
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert [(i["SK"]["S"], i["n"]["N"]) for i in contents(dynamodb, "fixed")] == [
        ("a", "1"),
        ("b", "5"),
    ]


def test_two_operations_on_one_item_are_refused_and_nothing_is_written(dynamodb):
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(TransactItems=[put("fixed", "a", 1), add("fixed", "a", 1)])
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert contents(dynamodb, "fixed") == []


def alive(kind: type) -> int:
    gc.collect()
    return sum(1 for candidate in gc.get_objects() if type(candidate) is kind)


def test_a_transaction_copies_no_table_and_keeps_no_item_it_replaced(dynamodb):
    for index in range(200):
        dynamodb.put_item(
            TableName="fixed",
            Item={"PK": {"S": "c"}, "SK": {"S": f"TURN#{index:04d}"}, "t": {"S": "x" * 100}},
        )
    tables, items = alive(Table), alive(Item)
    for index in range(50):
        dynamodb.transact_write_items(
            TransactItems=[put("fixed", f"new{index}", index), add("fixed", "state", 1)]
        )
        dynamodb.query(
            TableName="fixed",
            KeyConditionExpression="PK = :c",
            ExpressionAttributeValues={":c": {"S": "c"}},
        )
    assert alive(Table) == tables
    assert alive(Item) == items + 51  # the 50 new items and the state: nothing else kept
    assert Table.instances_tracked == []  # type: ignore[attr-defined]
    assert Item.instances_tracked == []  # type: ignore[attr-defined]


def test_memory_stays_flat_over_a_thousand_transactions_on_a_growing_table(dynamodb):
    def session(start: int, count: int) -> None:
        for index in range(start, start + count):
            dynamodb.transact_write_items(
                TransactItems=[
                    put("fixed", f"TURN#{index % 50:04d}", index),
                    add("fixed", "state", 1),
                ]
            )

    session(0, 200)  # the table is at its size: fifty turns and the state
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        session(200, 1000)
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert growth < 1_000_000, f"{growth} bytes held after a thousand transactions"


def test_install_is_idempotent_and_replaces_motos_transactions():
    moto_dynamodb.install()
    moto_dynamodb.install()
    assert DynamoDBBackend.transact_write_items is moto_dynamodb.transact_write_items
    assert moto_dynamodb.MOTO_TRANSACT_WRITE_ITEMS is not moto_dynamodb.transact_write_items


class motos_own_queries:
    """moto's `Table.query` and `Table.all_items` for the duration of a `with`."""

    def __enter__(self) -> None:
        self.fixed = (Table.query, Table.all_items)
        Table.query = moto_dynamodb.MOTO_QUERY  # type: ignore[method-assign]
        Table.all_items = moto_dynamodb.MOTO_ALL_ITEMS  # type: ignore[method-assign]

    def __exit__(self, *_: object) -> None:
        Table.query, Table.all_items = self.fixed  # type: ignore[method-assign]


def pages(client: Any, **query: Any) -> list[list[dict[str, Any]]]:
    found: list[list[dict[str, Any]]] = []
    while True:
        answer = client.query(TableName="fixed", **query)
        found.append(answer["Items"])
        if "LastEvaluatedKey" not in answer:
            return found
        query["ExclusiveStartKey"] = answer["LastEvaluatedKey"]


QUERIES = st.fixed_dictionaries(
    {
        "KeyConditionExpression": st.sampled_from(
            [
                "PK = :p",
                "PK = :p AND begins_with(SK, :s)",
                "PK = :p AND SK BETWEEN :s AND :t",
                "PK = :p AND SK = :s",
                "PK = :p AND SK < :s",
                "PK = :p AND SK <= :s",
                "PK = :p AND SK > :s",
                "PK = :p AND SK >= :s",
            ]
        ),
        "low": st.sampled_from(["T#01", "T#010", "T#", "T#04", "A", "U", "T#0000"]),
        "high": st.sampled_from(["T#030", "T#012", "T#1", "T#040", "T#00"]),
        "Limit": st.integers(1, 7),
        "ScanIndexForward": st.booleans(),
        "partition": st.sampled_from(["p0", "p1", "p2", "none"]),
    }
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=120)
@given(
    st.lists(st.tuples(st.sampled_from(["p0", "p1", "p2"]), st.integers(0, 40)), max_size=60),
    QUERIES,
)
def test_every_query_answers_as_under_motos_own_code(dynamodb, items, drawn):
    for item in dynamodb.scan(TableName="fixed")["Items"]:
        dynamodb.delete_item(TableName="fixed", Key={"PK": item["PK"], "SK": item["SK"]})
    for partition, number in items:
        dynamodb.put_item(
            TableName="fixed",
            Item={"PK": {"S": partition}, "SK": {"S": f"T#{number:03d}"}, "n": {"N": "1"}},
        )
    values = {":p": {"S": drawn["partition"]}}
    if ":s" in drawn["KeyConditionExpression"]:
        values[":s"] = {"S": drawn["low"]}
    if ":t" in drawn["KeyConditionExpression"]:
        values[":t"] = {"S": max(drawn["low"], drawn["high"])}
    query = {
        "KeyConditionExpression": drawn["KeyConditionExpression"],
        "ExpressionAttributeValues": values,
        "Limit": drawn["Limit"],
        "ScanIndexForward": drawn["ScanIndexForward"],
    }
    fixed = pages(dynamodb, **query)
    with motos_own_queries():
        original = pages(dynamodb, **query)
    assert fixed == original


def test_a_query_on_the_tables_key_reads_its_partition_not_the_table(dynamodb, monkeypatch):
    for index in range(30):
        for partition in ("mine", "other"):
            dynamodb.put_item(
                TableName="fixed",
                Item={"PK": {"S": partition}, "SK": {"S": f"T#{index:03d}"}},
            )
    whole_table_reads: list[Any] = []
    motos_all_items = moto_dynamodb.MOTO_ALL_ITEMS

    def counted(table: Table) -> list[Item]:
        whole_table_reads.append(table)
        return motos_all_items(table)

    monkeypatch.setattr(moto_dynamodb, "MOTO_ALL_ITEMS", counted)
    answer = dynamodb.query(
        TableName="fixed",
        KeyConditionExpression="PK = :p",
        ExpressionAttributeValues={":p": {"S": "mine"}},
    )
    assert [item["SK"]["S"] for item in answer["Items"]] == [f"T#{i:03d}" for i in range(30)]
    assert whole_table_reads == []
    dynamodb.scan(TableName="fixed")  # a scan still reads the whole table, as moto does
    assert len(whole_table_reads) == 1


def test_a_query_on_a_sort_key_range_tests_that_range_not_the_partition(dynamodb, monkeypatch):
    for index in range(500):
        dynamodb.put_item(
            TableName="fixed", Item={"PK": {"S": "mine"}, "SK": {"S": f"T#{index:03d}"}}
        )
    tested: list[Any] = []
    motos_compare = DynamoType.compare

    def counted(self: DynamoType, comparison: str, bounds: list[Any]) -> bool:
        tested.append(self.value)
        return motos_compare(self, comparison, bounds)

    monkeypatch.setattr(DynamoType, "compare", counted)
    answer = dynamodb.query(
        TableName="fixed",
        KeyConditionExpression="PK = :p AND SK BETWEEN :low AND :high",
        ExpressionAttributeValues={
            ":p": {"S": "mine"},
            ":low": {"S": "T#100"},
            ":high": {"S": "T#104"},
        },
    )
    assert [item["SK"]["S"] for item in answer["Items"]] == [f"T#{i}" for i in range(100, 105)]
    # The run, and the item on either side of it, which moto tests and leaves out.
    assert sorted(tested) == [f"T#{i:03d}" for i in range(99, 106)]


def test_a_write_between_two_queries_is_seen_by_the_second(dynamodb):
    def keys() -> list[str]:
        answer = dynamodb.query(
            TableName="fixed",
            KeyConditionExpression="PK = :p AND begins_with(SK, :s)",
            ExpressionAttributeValues={":p": {"S": "mine"}, ":s": {"S": "T#"}},
        )
        return [item["SK"]["S"] for item in answer["Items"]]

    def key(sort_key: str) -> dict[str, Any]:
        return {"PK": {"S": "mine"}, "SK": {"S": sort_key}}

    dynamodb.put_item(TableName="fixed", Item=key("T#2"))
    assert keys() == ["T#2"]
    dynamodb.put_item(TableName="fixed", Item=key("T#1"))
    assert keys() == ["T#1", "T#2"]
    dynamodb.update_item(
        TableName="fixed",
        Key=key("T#3"),
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "1"}},
    )
    assert keys() == ["T#1", "T#2", "T#3"]
    dynamodb.delete_item(TableName="fixed", Key=key("T#2"))
    assert keys() == ["T#1", "T#3"]
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": "fixed", "Item": key("T#0")}}]
    )
    assert keys() == ["T#0", "T#1", "T#3"]
