"""Every field's limits through the API: refused with a 4xx naming the field, nothing written.

Each table is tried case by case on one handler (a fresh handler per case
would cost a second each); a case that is not refused as it should be is
collected, and the test fails listing all of them. After every case the table
is checked to be exactly as it was: a refusal writes nothing.

The size limit is the store's: a turn's content, encoded as it is stored
(JSON, UTF-8), may take `ITEM_LIMIT_BYTES - TURN_ITEM_OVERHEAD_BYTES` bytes.
It is a limit in bytes, not characters: multi-byte characters and JSON
escapes count for what they cost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from moto.dynamodb.exceptions import ItemSizeTooLarge
from moto.dynamodb.models import dynamo_type

from adapters.conversation_store import ITEM_LIMIT_BYTES, TURN_ITEM_OVERHEAD_BYTES
from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import TABLE, Api, iso
from tests.support.reliability import tally

CONTENT_LIMIT = ITEM_LIMIT_BYTES - TURN_ITEM_OVERHEAD_BYTES
"""Bytes a turn's stored content may take."""
TEXT_ENVELOPE = len(json.dumps([{"text": ""}], separators=(",", ":")))
"""What `[{"text":"..."}]` costs around the text itself."""
DYNAMODB_ITEM_LIMIT = 400 * 1024
"""DynamoDB's documented item limit: attribute names and values, UTF-8 bytes."""

MAX_TENANT = "t" * 64
MAX_CONTACT = "c" * 128
MAX_MESSAGE_ID = "m" * 128


def converse_path(tenant: str = "acme", contact: str = "c1") -> str:
    return f"/v1/tenants/{tenant}/contacts/{contact}/converse"


def turns_path(tenant: str = "acme", contact: str = "c1") -> str:
    return f"/v1/tenants/{tenant}/contacts/{contact}/turns"


def memory_path(tenant: str = "acme", contact: str = "c1") -> str:
    return f"/v1/tenants/{tenant}/contacts/{contact}/memory"


@dataclass(frozen=True)
class Case:
    label: str
    method: str
    path: str
    body: Any
    field: str
    """The refusal's message must start with this (the field it names)."""
    status: int = 400
    names: tuple[str, ...] = ()
    """Further words the message must carry (a nested field's own name)."""


def refuse_all(api: Api, cases: list[Case]) -> int:
    """Send every case; each must be refused as described and write nothing."""
    failures = []
    before = api.items()
    for case in cases:
        status, answer = api.request(case.method, case.path, case.body)
        message = (answer or {}).get("error", {}).get("message", "") if status >= 400 else ""
        problems = []
        if status != case.status:
            problems.append(f"status {status}, not {case.status}")
        if not message.startswith(case.field):
            problems.append(f"message {message!r} does not start with {case.field!r}")
        problems += [f"message {message!r} lacks {n!r}" for n in case.names if n not in message]
        if api.items() != before:
            problems.append("something was written")
            before = api.items()
        if problems:
            failures.append(f"{case.label}: " + "; ".join(problems))
    assert not failures, "\n".join(failures)
    tally("Input limits", inputs_tried=len(cases))
    return len(cases)


def converse_body(**message: Any) -> dict[str, Any]:
    return {"message": {"text": "hi", **message}}


def reply_body(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "text": "hi", **fields}


def tool_use(tool_use_id: Any = "t1", name: Any = "lookup", tool_input: Any = None) -> Any:
    return {
        "toolUse": {
            "toolUseId": tool_use_id,
            "name": name,
            "input": {} if tool_input is None else tool_input,
        }
    }


def tool_result(tool_use_id: Any = "t1", content: Any = None, **extra: Any) -> Any:
    blocks = [{"text": "42"}] if content is None else content
    return {"toolResult": {"toolUseId": tool_use_id, "content": blocks, **extra}}


# --- ids ----------------------------------------------------------------------------

BAD_TENANT_IDS = [
    "t" * 65,
    "-acme",
    "_acme",
    "ac me",
    "ac.me",
    "ac$me",
    "ac:me",
    "ac@me",
    "ac+me",
    "acmé",
    "ac%2Fme",
    "ac'me",
]
BAD_CONTACT_IDS = [
    "c" * 129,
    ".c1",
    "-c1",
    "_c1",
    ":c1",
    "c 1",
    "c,1",
    "c'1",
    "c*1",
    "c!1",
    "c=1",
    "c;1",
    "c~1",
    "c%231",
    "cé",
]


def test_tenant_ids_out_of_pattern_or_length_are_refused_on_every_route(api):
    cases = []
    for bad in BAD_TENANT_IDS:
        cases += [
            Case(
                f"converse {bad!r}", "POST", converse_path(tenant=bad), converse_body(), "tenantId"
            ),
            Case(f"turns {bad!r}", "POST", turns_path(tenant=bad), reply_body(), "tenantId"),
            Case(f"memory {bad!r}", "GET", memory_path(tenant=bad), None, "tenantId"),
        ]
    refuse_all(api, cases)


def test_contact_ids_out_of_pattern_or_length_are_refused_on_every_route(api):
    cases = []
    for bad in BAD_CONTACT_IDS:
        cases += [
            Case(
                f"converse {bad!r}",
                "POST",
                converse_path(contact=bad),
                converse_body(),
                "contactId",
            ),
            Case(f"turns {bad!r}", "POST", turns_path(contact=bad), reply_body(), "contactId"),
            Case(f"memory {bad!r}", "GET", memory_path(contact=bad), None, "contactId"),
        ]
    refuse_all(api, cases)


def test_empty_ids_match_no_route_and_a_well_formed_unknown_tenant_is_404(api):
    refuse_all(
        api,
        [
            Case(
                "empty tenant", "POST", converse_path(tenant=""), converse_body(), "no route", 404
            ),
            Case(
                "empty contact", "POST", converse_path(contact=""), converse_body(), "no route", 404
            ),
            Case("empty contact", "POST", turns_path(contact=""), reply_body(), "no route", 404),
            Case("empty contact", "GET", memory_path(contact=""), None, "no route", 404),
            # The longest well-formed tenant id passes the pattern; the rules decide.
            Case("64 chars", "POST", converse_path(MAX_TENANT), converse_body(), "tenant", 404),
            Case("slash", "POST", converse_path(contact="c/1"), converse_body(), "no route", 404),
        ],
    )


DIRECT_IDS: list[tuple[dict[str, Any], str]] = [
    ({"tenantId": "", "contactId": "c1"}, "tenantId"),
    ({"tenantId": "t" * 65, "contactId": "c1"}, "tenantId"),
    ({"tenantId": "ac me", "contactId": "c1"}, "tenantId"),
    ({"tenantId": 7, "contactId": "c1"}, "tenantId"),
    ({"contactId": "c1"}, "tenantId"),
    ({"tenantId": "acme", "contactId": ""}, "contactId"),
    ({"tenantId": "acme", "contactId": "c" * 129}, "contactId"),
    ({"tenantId": "acme", "contactId": "c 1"}, "contactId"),
    ({"tenantId": "acme", "contactId": ["c1"]}, "contactId"),
    ({"tenantId": "acme"}, "contactId"),
]


def test_ids_of_a_direct_invocation_are_held_to_the_same_patterns(api):
    failures = []
    for ids, field_name in DIRECT_IDS:
        for action, body in [("converse", {"message": {"text": "hi"}}), ("record", reply_body())]:
            event = {"action": action, **ids, **body}
            answer = api.handler.lambda_handler(event, LambdaContextStandIn())
            message = answer.get("error", {}).get("message", "")
            if answer.get("statusCode") != 400 or not message.startswith(field_name):
                failures.append(f"{event}: {answer}")
    assert not failures, "\n".join(failures)
    assert api.items() == []
    tally("Input limits", inputs_tried=2 * len(DIRECT_IDS))


def test_message_ids_out_of_pattern_or_length_are_refused(api):
    bad_ids: list[Any] = [
        "",
        "m" * 129,
        "-m",
        ".m",
        "m 1",
        "m#1",
        "m/1",
        "m@1",
        "m+1",
        "mé",
        5,
        True,
    ]
    cases = []
    for bad in bad_ids:
        cases += [
            Case(
                f"converse id {bad!r}", "POST", converse_path(), converse_body(id=bad), "message.id"
            ),
            Case(f"reply id {bad!r}", "POST", turns_path(), reply_body(id=bad), "id"),
        ]
    refuse_all(api, cases)


def test_the_longest_ids_are_accepted_and_stored_under_their_own_keys(make_api, tmp_path):
    api = _api_with_tenant(make_api, tmp_path, MAX_TENANT)
    status, answer = api.converse(
        "hi", tenant=MAX_TENANT, contact=MAX_CONTACT, message_id=MAX_MESSAGE_ID
    )
    assert status == 200, answer
    (turn,) = api.turn_items()
    assert turn["PK"]["S"] == f"TENANT#{MAX_TENANT}#CONTACT#{MAX_CONTACT}"
    assert turn["turnId"]["S"] == MAX_MESSAGE_ID
    tally("Input limits", inputs_tried=1)


def _api_with_tenant(make_api: Callable[..., Api], tmp_path: Path, tenant: str) -> Api:
    rules = tmp_path / "rules-with-tenant.json"
    rules.write_text(json.dumps({"tenants": {tenant: {}, "acme": {}}}))
    return make_api(RULES_FILE=str(rules))


# --- text, content blocks, tools ----------------------------------------------------


def test_empty_missing_or_mistyped_text_is_refused(api):
    cases = [
        Case("empty", "POST", converse_path(), {"message": {"text": ""}}, "message"),
        Case("blank", "POST", converse_path(), {"message": {"text": " \n\t "}}, "message"),
        Case("number", "POST", converse_path(), {"message": {"text": 5}}, "message.text"),
        Case("list", "POST", converse_path(), {"message": {"text": ["hi"]}}, "message.text"),
        Case("null, no content", "POST", converse_path(), {"message": {"text": None}}, "message"),
        Case("neither", "POST", converse_path(), {"message": {}}, "message"),
        Case(
            "both",
            "POST",
            converse_path(),
            {"message": {"text": "a", "content": [{"text": "b"}]}},
            "message",
        ),
        Case(
            "empty block",
            "POST",
            converse_path(),
            {"message": {"content": [{"text": ""}]}},
            "message.content",
        ),
        Case("reply empty", "POST", turns_path(), reply_body(text=""), "text: must not be"),
        Case("reply blank", "POST", turns_path(), reply_body(text="   "), "text: must not be"),
        Case("reply number", "POST", turns_path(), reply_body(text=1), "text"),
        Case(
            "lone surrogate",
            "POST",
            converse_path(),
            '{"message": {"text": "\\ud800"}}',
            "message.text",
        ),
        Case(
            "reply surrogate",
            "POST",
            turns_path(),
            '{"role": "assistant", "text": "\\udfff"}',
            "text",
        ),
    ]
    refuse_all(api, cases)


def test_content_blocks_are_limited_to_fifty_and_to_their_known_kinds(api):
    fifty_one = [{"text": f"part {n}"} for n in range(51)]
    cases = [
        Case(
            "51 blocks",
            "POST",
            converse_path(),
            {"message": {"content": fifty_one}},
            "message.content",
        ),
        Case("no blocks", "POST", converse_path(), {"message": {"content": []}}, "message.content"),
        Case(
            "reply 51", "POST", turns_path(), {"role": "assistant", "content": fifty_one}, "content"
        ),
        Case(
            "51 results",
            "POST",
            turns_path(),
            {"role": "user", "content": [tool_result(content=fifty_one)]},
            "content.0",
            names=("toolResult", "content"),
        ),
        Case(
            "no results",
            "POST",
            turns_path(),
            {"role": "user", "content": [tool_result(content=[])]},
            "content.0",
            names=("toolResult",),
        ),
        Case(
            "unknown kind",
            "POST",
            turns_path(),
            {"role": "assistant", "content": [{"image": {"format": "png"}}]},
            "content.0",
        ),
        Case(
            "two kinds in one",
            "POST",
            turns_path(),
            {"role": "assistant", "content": [{"text": "a", **tool_use()}]},
            "content.0",
        ),
        Case(
            "block not an object",
            "POST",
            converse_path(),
            {"message": {"content": ["hi"]}},
            "message.content",
        ),
    ]
    refuse_all(api, cases)
    # Fifty is the limit, not the refusal.
    fifty = [{"text": f"part {n}"} for n in range(50)]
    status, _ = api.request("POST", converse_path(), {"message": {"content": fifty}})
    assert status == 200
    status, _ = api.request(
        "POST", turns_path(), {"role": "user", "content": [tool_result(content=fifty)]}
    )
    assert status == 201


def test_tool_ids_names_and_inputs_are_held_to_their_patterns(api):
    bad_ids: list[Any] = ["", "t" * 65, "t 1", "t/1", "t#1", "té", 5]
    bad_names: list[Any] = ["", "n" * 65, "n.1", "n 1", "n:1", "né", None]
    cases = []
    for bad in bad_ids:
        cases += [
            Case(
                f"toolUseId {bad!r}",
                "POST",
                turns_path(),
                {"role": "assistant", "content": [tool_use(tool_use_id=bad)]},
                "content.0",
                names=("toolUseId",),
            ),
            Case(
                f"result toolUseId {bad!r}",
                "POST",
                turns_path(),
                {"role": "user", "content": [tool_result(tool_use_id=bad)]},
                "content.0",
                names=("toolUseId",),
            ),
        ]
    cases += [
        Case(
            f"name {bad!r}",
            "POST",
            turns_path(),
            {"role": "assistant", "content": [tool_use(name=bad)]},
            "content.0",
            names=("name",),
        )
        for bad in bad_names
    ]
    cases += [
        Case(
            f"input {bad!r}",
            "POST",
            turns_path(),
            {"role": "assistant", "content": [tool_use(tool_input=bad)]},
            "content.0",
            names=("input",),
        )
        for bad in [[1, 2], "x", 5]
    ]
    cases += [
        Case(
            "status",
            "POST",
            turns_path(),
            {"role": "user", "content": [tool_result(status="maybe")]},
            "content.0",
            names=("status",),
        ),
        Case(
            "json not an object",
            "POST",
            turns_path(),
            {"role": "user", "content": [tool_result(content=[{"json": "text"}])]},
            "content.0",
            names=("json",),
        ),
        Case(
            "contact calls a tool",
            "POST",
            converse_path(),
            {"message": {"content": [{"text": "hi"}, tool_use()]}},
            "message",
        ),
        Case(
            "contact's words on /turns",
            "POST",
            turns_path(),
            {"role": "user", "text": "my own words"},
            "body",
        ),
        Case(
            "assistant returns a result",
            "POST",
            turns_path(),
            {"role": "assistant", "content": [tool_result()]},
            "body",
        ),
        Case("role", "POST", turns_path(), {"role": "system", "text": "hi"}, "role"),
        Case("no role", "POST", turns_path(), {"text": "hi"}, "role"),
    ]
    refuse_all(api, cases)
    longest = {"role": "assistant", "content": [tool_use(tool_use_id="t" * 64, name="n" * 64)]}
    assert api.request("POST", turns_path(), longest)[0] == 201


@pytest.mark.parametrize(
    "tool_use_id",
    ["functions.get_weather:0", "call:abc", "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "a.b-c_d:9"],
)
def test_tool_ids_that_converse_takes_are_taken(api, tool_use_id):
    call = {"role": "assistant", "content": [tool_use(tool_use_id=tool_use_id)]}
    assert api.request("POST", turns_path(), call)[0] == 201
    result = {"role": "user", "content": [tool_result(tool_use_id=tool_use_id)]}
    assert api.request("POST", turns_path(), result)[0] == 201
    status, answer = api.converse("and?")
    assert status == 200
    assert (
        answer["converse"]["messages"][-1]["content"][0]["toolResult"]["toolUseId"] == tool_use_id
    )


def test_sent_at_must_be_an_rfc3339_instant_with_its_offset(api):
    bad: list[Any] = [
        "yesterday",
        "",
        "2026-11-02T10:00:00",
        "2026-11-02",
        "10:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-11-02T25:00:00Z",
        "2026-11-02 10:00:00Z",
        "20261102T100000Z",
        "2026-W45-1",
        "1969-12-31T23:59:59Z",
        1_700_000_000,
        "1700000000",
        True,
        [],
        {},
    ]
    cases = []
    for value in bad:
        cases += [
            Case(
                f"converse {value!r}",
                "POST",
                converse_path(),
                converse_body(sentAt=value),
                "message.sentAt",
            ),
            Case(f"reply {value!r}", "POST", turns_path(), reply_body(sentAt=value), "sentAt"),
        ]
    ahead = iso(datetime.now(UTC) + timedelta(minutes=6))
    cases += [
        Case(
            "6 min ahead",
            "POST",
            converse_path(),
            converse_body(sentAt=ahead),
            "message.sentAt",
            422,
        ),
        Case("reply 6 min ahead", "POST", turns_path(), reply_body(sentAt=ahead), "sentAt", 422),
    ]
    refuse_all(api, cases)
    # An offset other than Z is an instant too, held in UTC.
    status, answer = api.reply("hi", message_id="r-1")
    assert status == 201
    offset = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S+02:00")
    status, answer = api.request("POST", turns_path(), reply_body(sentAt=offset, id="r-2"))
    assert status == 201
    assert answer["turn"]["sentAt"].endswith("Z")


def test_bodies_that_are_not_the_expected_object_are_refused(api):
    deep = (
        '{"role": "assistant", "content": ['
        + tool_use_json('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
        + "]}"
    )
    cases = [
        Case("not json", "POST", converse_path(), "not json", "body"),
        Case("truncated", "POST", converse_path(), '{"message": {"text": "hi"', "body"),
        Case("array", "POST", converse_path(), "[1, 2]", "body"),
        Case("string", "POST", converse_path(), '"hi"', "body"),
        Case("null", "POST", converse_path(), "null", "body"),
        Case("no body", "POST", converse_path(), None, "body"),
        Case("empty object", "POST", converse_path(), {}, "message"),
        Case("message a string", "POST", converse_path(), {"message": "hi"}, "message"),
        Case("unknown top field", "POST", converse_path(), {**converse_body(), "x": 1}, "x"),
        Case(
            "unknown message field",
            "POST",
            converse_path(),
            converse_body(colour="red"),
            "message.colour",
        ),
        Case("unknown reply field", "POST", turns_path(), reply_body(colour="red"), "colour"),
        Case(
            "NaN",
            "POST",
            turns_path(),
            '{"role": "assistant", "content": [' + tool_use_json('{"x": NaN}') + "]}",
            "body",
        ),
        Case(
            "Infinity",
            "POST",
            turns_path(),
            '{"role": "assistant", "content": [' + tool_use_json('{"x": -Infinity}') + "]}",
            "body",
        ),
        Case(
            "huge number",
            "POST",
            turns_path(),
            '{"role": "assistant", "content": ['
            + tool_use_json('{"x": ' + "9" * 5000 + "}")
            + "]}",
            "body",
        ),
        Case("nested too deep", "POST", turns_path(), deep, "body"),
    ]
    refuse_all(api, cases)


def tool_use_json(raw_input: str) -> str:
    return '{"toolUse": {"toolUseId": "t1", "name": "n", "input": ' + raw_input + "}}"


# --- size: the 413 boundary ---------------------------------------------------------


@pytest.fixture
def dynamodb_item_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto refuses items over 405,000 bytes; DynamoDB's documented limit is 400 KB.

    The store's limit leaves room for the turn item's keys and other
    attributes under DynamoDB's 409,600 bytes, which moto's smaller limit
    would hide; the same sum moto makes is held to the documented limit.
    """

    def set_item(self: dict[str, Any], key: str, value: Any) -> None:
        sizes = [
            item.size() if isinstance(item, dynamo_type.DynamoType) else len(str(item).encode())
            for item in [*self.keys(), *self.values(), key, value]
        ]
        if sum(sizes) > DYNAMODB_ITEM_LIMIT:
            raise ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    monkeypatch.setattr(dynamo_type.LimitedSizeDict, "__setitem__", set_item)


def _text_of(unit: str, escaped_bytes: int, extra: int) -> str:
    """A text of `unit`s (padded with ASCII) stored in exactly the limit, plus `extra` units."""
    budget = CONTENT_LIMIT - TEXT_ENVELOPE
    return "x" * (budget % escaped_bytes) + unit * (budget // escaped_bytes + extra)


SIZES = [
    ("ascii", "x", 1),
    ("two-byte é", "é", 2),
    ("three-byte €", "€", 3),
    ("four-byte emoji", "😀", 4),
    ("escaped quote", '"', 2),
]


@pytest.mark.usefixtures("dynamodb_item_limit")
def test_text_at_the_byte_limit_is_stored_and_one_unit_more_is_413(make_api, tmp_path):
    api = _api_with_tenant(make_api, tmp_path, MAX_TENANT)
    for index, (label, unit, cost) in enumerate(SIZES):
        # The longest ids too: the item's other attributes must fit in the overhead.
        contact = MAX_CONTACT[:-2] + f"{index:02d}"
        partition = f"TENANT#{MAX_TENANT}#CONTACT#{contact}"
        over = _text_of(unit, cost, 1)
        status, answer = api.converse(over, message_id="m-over", tenant=MAX_TENANT, contact=contact)
        assert (status, answer["error"]["code"]) == (413, "message_too_large"), label
        status, answer = api.reply(over, message_id="r-over", tenant=MAX_TENANT, contact=contact)
        assert (status, answer["error"]["code"]) == (413, "message_too_large"), label
        assert _partition(api, partition) == []
        at_limit = _text_of(unit, cost, 0)
        stored = json.dumps([{"text": at_limit}], separators=(",", ":"), ensure_ascii=False)
        assert len(stored.encode()) == CONTENT_LIMIT
        status, _ = api.converse(
            at_limit, message_id=MAX_MESSAGE_ID, tenant=MAX_TENANT, contact=contact
        )
        assert status == 200, label
        status, _ = api.reply(at_limit, message_id="r" * 128, tenant=MAX_TENANT, contact=contact)
        assert status == 201, label
        turns = [t for t in _partition(api, partition) if "turnId" in t]
        assert len(turns) == 2
        for turn in turns:
            assert len(turn["content"]["S"].encode()) == CONTENT_LIMIT
        tally("Input limits", inputs_tried=4)


def _partition(api: Api, partition: str) -> list[dict[str, Any]]:
    """A conversation's items, every page of them (a page holds at most 1 MB)."""
    paginator = api.dynamodb.get_paginator("query")
    pages = paginator.paginate(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": partition}},
    )
    return [item for page in pages for item in page["Items"]]


def test_the_limit_counts_bytes_not_characters(api):
    # As many characters as the longest ASCII text, one of them two bytes long.
    text = "é" + "x" * (CONTENT_LIMIT - TEXT_ENVELOPE - 1)
    status, answer = api.converse(text)
    assert status == 413
    assert str(CONTENT_LIMIT) in answer["error"]["message"]
    assert api.items() == []
    tally("Input limits", inputs_tried=1)


def test_tool_content_over_the_limit_is_413_and_nothing_is_written(api):
    big_input = {"query": "q" * CONTENT_LIMIT}
    big_result = [{"json": {"rows": ["r" * (CONTENT_LIMIT // 2)] * 2}}]
    cases = [
        Case(
            "tool input",
            "POST",
            turns_path(),
            {"role": "assistant", "content": [tool_use(tool_input=big_input)]},
            "the message",
            413,
        ),
        Case(
            "tool result",
            "POST",
            turns_path(),
            {"role": "user", "content": [tool_result(content=big_result)]},
            "the message",
            413,
        ),
        Case(
            "many blocks",
            "POST",
            converse_path(),
            {"message": {"content": [{"text": "y" * (CONTENT_LIMIT // 40)}] * 41}},
            "the message",
            413,
        ),
    ]
    refuse_all(api, cases)


def test_a_late_reply_does_not_shorten_the_conversation_states_ttl(api):
    assert api.converse("now", message_id="q-1")[0] == 200
    state = api.state()
    assert state is not None
    ttl = int(state["expiresAt"]["N"])
    late = datetime.now(UTC) - timedelta(days=29)
    assert api.reply("a reply filed late", sent_at=late, message_id="r-1")[0] == 201
    state = api.state()
    assert state is not None
    assert int(state["expiresAt"]["N"]) >= ttl
