"""`make bench`'s write units: the billing rules on known items, and the figure on a short run.

The contacts index must not add a write to every converse call (SPEC section 10):
on a conversation of N exchanges it is written once, when the conversation starts.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import write_units
from bench.write_units import Write, bill, item_size, number_size, value_size, write_units_for

Item = dict[str, dict[str, Any]]


def sized(size: int, **extra: dict[str, Any]) -> Item:
    """An item of exactly `size` bytes: `PK` (3), `SK` (3) and `body` (4 + its length)."""
    item: Item = {"PK": {"S": "p"}, "SK": {"S": "s"}, **extra}
    item["body"] = {"S": "x" * (size - item_size(item) - len("body"))}
    assert item_size(item) == size
    return item


def test_attribute_values_are_sized_by_dynamodbs_rules():
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert number_size("123") == 3  # 3 significant digits: 2 bytes, plus 1
    assert number_size("1000") == 2  # trailing zeros trimmed: one digit
    assert number_size("-0.0012") == 2
    assert value_size({"N": "1767225600"}) == 5  # 8 digits once the zeros go
    assert value_size({"L": []}) == 3
    assert value_size({"L": [{"S": "ab"}, {"N": "7"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": {"S": "ab"}}}) == 3 + 1 + 1 + 2
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert item_size({"PK": {"S": "abc"}, "n": {"N": "42"}}) == 2 + 3 + 1 + 2


def test_a_transaction_and_an_update_are_billed_per_started_kb():
    # A transactional put of a 1.5 KB item: 2 started KB, twice.
    assert bill(Write("Put", True, None, sized(1536))).table == 4
    # An update from 0.9 KB to 1.1 KB: billed on the larger, 2 started KB, once.
    assert bill(Write("Update", False, sized(922), sized(1126))).table == 2
    # The same update the other way, and a put replacing a larger item: still the larger.
    assert bill(Write("Update", False, sized(1126), sized(922))).table == 2
    assert bill(Write("Put", False, sized(3000), sized(100))).table == 3
    # A delete is billed on the item deleted; a refused put of an absent item, at least 1.
    assert bill(Write("Delete", True, sized(2100), None)).table == 6
    assert bill(Write("Put", False, None, None)).table == 1
    assert write_units_for(1024, transactional=False) == 1
    assert write_units_for(1025, transactional=True) == 4


def test_the_index_is_billed_only_when_its_keys_appear_change_or_go():
    keys = {"contactsShard": {"S": "TENANT#t#SHARD#03"}, "contactId": {"S": "c1"}}
    listed, unlisted = sized(500, **keys), sized(500)
    bigger = sized(900, **keys)
    assert bill(Write("Update", True, unlisted, listed)).index_writes == 1
    assert bill(Write("Update", True, listed, listed)).index_writes == 0
    assert bill(Write("Update", True, listed, bigger)).index == 0  # KEYS_ONLY: nothing projected
    moved = {**listed, "contactsShard": {"S": "TENANT#t#SHARD#04"}}
    assert bill(Write("Put", False, listed, moved)).index_writes == 2  # a delete and a put
    assert bill(Write("Delete", False, listed, None)).index_writes == 1
    # Only an item with both keys is in the sparse index.
    half = sized(500, contactId={"S": "c1"})
    assert bill(Write("Update", False, None, half)).index == 0
    # The entry: the table's keys, the index's keys and 100 bytes, well under 1 KB.
    assert bill(Write("Update", False, unlisted, listed)).index == 1


@pytest.fixture(scope="module")
def figure() -> dict[str, Any]:
    return write_units.run(exchanges=5)


def test_the_index_is_written_once_a_conversation(figure):
    assert figure["exchanges"] == 5
    assert figure["gsi_writes"] == 1
    assert figure["gsi_wru_per_converse"] == round(1 / 5, 3)
    assert figure["gsi_wru_per_reply"] == 0
    assert figure["before"]["gsi_wru_per_converse"] == 0
    assert figure["converse_calls_costing_more"] == 1  # the first: it lists the contact
    assert figure["refused_write_requests"] == 0


def test_before_costs_no_more_than_after(figure):
    before = figure["before"]
    assert 0 < before["wru_per_converse"] <= figure["wru_per_converse"]
    assert 0 < before["wru_per_reply"] <= figure["wru_per_reply"]
    assert figure["added_wru_per_converse"] == round(
        figure["wru_per_converse"] - before["wru_per_converse"], 3
    )
    assert before["marker_item_bytes_median"] < figure["marker_item_bytes_median"]
    assert before["state_item_bytes_median"] < figure["state_item_bytes_median"]
