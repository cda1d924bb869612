"""Tool-heavy conversations through the handler and DynamoDB: always valid, bounded, never empty.

The cases the issue tracker of every peer knows (a long tool loop, a huge
tool input, a contact writing while a call is pending, a result nobody asked
for), then a property over random tool conversations recorded through the
API, each converse answer checked against botocore's Converse model and
Bedrock's rules.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from converse_history.api_models import ConverseResponse
from local.aws_resources import create_table
from local.proxy_events import LambdaContextStandIn
from memory_core.repairs import NO_RESULT_RECORDED
from memory_core.trim import TRIMMED_INPUT_KEY
from tests.integration.conftest import TABLE, Api, iso, log_lines, minutes_ago
from tests.support.converse_validator import assert_valid_for_converse
from tests.support.reliability import tally
from tests.support.tool_conversations import Recorded, through_the_api, tool_conversations

TENANT = "roomy"
QUESTION = "What changed in clause 7 since March?"


def path(route: str, contact: str = "c1") -> str:
    return f"/v1/tenants/{TENANT}/contacts/{contact}/{route}"


def record(api: Api, body: dict[str, Any], at: datetime, contact: str = "c1") -> None:
    status, answer = api.request("POST", path("turns", contact), {**body, "sentAt": iso(at)})
    assert status == 201, answer


def ask(api: Api, content: list[dict[str, Any]], at: datetime | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"content": content}
    if at is not None:
        message["sentAt"] = iso(at)
    status, answer = api.request("POST", path("converse"), {"message": message})
    assert status == 200, answer
    ConverseResponse.model_validate(answer)
    assert_valid_for_converse(answer["converse"])
    return dict(answer)


def call(tool_use_id: str, **tool_input: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": "lookup_clause", "input": tool_input}}


def result(tool_use_id: str, text: str) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "content": [{"text": text}]}}


def tool_loop(api: Api, pairs: int, *, answer: bool = True, input_chars: int = 10) -> datetime:
    """A question, `pairs` calls and results, then (if `answer`) the agent's answer."""
    at = minutes_ago(3 * pairs + 10)
    ask(api, [{"text": QUESTION}], at)
    for n in range(pairs):
        at += timedelta(seconds=40)
        record(
            api,
            {"role": "assistant", "content": [call(f"functions.lookup:{n}", q="x" * input_chars)]},
            at,
        )
        at += timedelta(seconds=40)
        record(api, {"role": "user", "content": [result(f"functions.lookup:{n}", f"v{n}")]}, at)
    if answer:
        at += timedelta(seconds=40)
        record(api, {"role": "assistant", "text": "Clause 7 changed twice."}, at)
    return at


def test_a_question_answered_by_a_13_pair_tool_loop_is_still_in_the_next_history(api):
    tool_loop(api, 13)
    answer = ask(api, [{"text": "Thanks. And clause 8?"}])
    history = answer["history"]
    assert history[0]["content"] == [
        {"text": QUESTION},
        {"text": "… 4 messages of this exchange omitted …"},
    ]
    assert history[1]["role"] == "assistant"
    assert answer["window"]["kept"] == 24
    assert len(history) == 24


def test_a_question_far_beyond_the_first_page_is_read_back_to(api):
    tool_loop(api, 60)  # 122 turns: the first page of the read holds 26
    answer = ask(api, [{"text": "Thanks."}])
    assert answer["history"][0]["content"][0] == {"text": QUESTION}
    assert answer["history"][0]["content"][1] == {
        "text": "… 98 messages of this exchange omitted …"
    }


def test_a_tool_call_of_10000_tokens_is_trimmed_keeping_its_id_and_name(api):
    at = minutes_ago(10)
    ask(api, [{"text": "Draft the contract."}], at)
    record(
        api,
        {"role": "assistant", "content": [call("draft:1", body="d" * 40_000)]},
        at + timedelta(seconds=1),
    )
    record(
        api, {"role": "user", "content": [result("draft:1", "saved")]}, at + timedelta(seconds=2)
    )
    record(api, {"role": "assistant", "text": "Done."}, at + timedelta(seconds=3))
    answer = ask(api, [{"text": "Thanks"}])
    tool_use = answer["history"][1]["content"][0]["toolUse"]
    assert (tool_use["toolUseId"], tool_use["name"]) == ("draft:1", "lookup_clause")
    assert set(tool_use["input"]) == {TRIMMED_INPUT_KEY}
    assert "tokens omitted …" in tool_use["input"][TRIMMED_INPUT_KEY]
    assert answer["window"]["trimmed"] == 1
    assert answer["window"]["estimatedTokens"] < 1200


def test_the_contact_returning_the_last_result_follows_its_call(api):
    tool_loop(api, 13, answer=False)
    at = minutes_ago(1)
    record(api, {"role": "assistant", "content": [call("functions.lookup:99", q="y")]}, at)
    answer = ask(api, [{"text": "here it is"}, result("functions.lookup:99", "42")])
    messages = answer["converse"]["messages"]
    assert messages[0]["content"][0] == {"text": QUESTION}
    assert messages[-1]["content"][0]["toolResult"]["toolUseId"] == "functions.lookup:99"
    assert answer["window"]["repaired"] == 1  # its text came first: the result moved ahead


def test_a_contact_writing_while_a_call_is_pending_gets_an_answered_call_and_results_first(
    api, logs
):
    at = minutes_ago(10)
    ask(api, [{"text": "What is the weather in Porto?"}], at)
    record(
        api,
        {"role": "assistant", "content": [call("call:abc", city="Porto")]},
        at + timedelta(seconds=1),
    )
    logs.seek(0)
    logs.truncate()
    pending = ask(api, [{"text": "hello? still there?"}], at + timedelta(seconds=30))
    assert pending["converse"]["messages"][-1]["content"][0] == {
        "toolResult": {
            "toolUseId": "call:abc",
            "content": [{"text": NO_RESULT_RECORDED}],
            "status": "error",
        }
    }
    assert pending["window"]["repaired"] == 1
    repairs = [
        r for r in log_lines(logs.getvalue()) if r.get("message") == "converse_fragment_repaired"
    ]
    assert [(r["repair"], r["toolUseId"]) for r in repairs] == [("missing_tool_result", "call:abc")]
    # The result arrives after the contact's message; the next fragment has it first.
    record(
        api, {"role": "user", "content": [result("call:abc", "18 °C")]}, at + timedelta(seconds=40)
    )
    later = ask(api, [{"text": "and tomorrow?"}], at + timedelta(seconds=50))
    last = later["converse"]["messages"][-1]["content"]
    # The cache point after the history sits between its blocks and the current message's.
    assert [next(iter(block)) for block in last] == ["toolResult", "text", "cachePoint", "text"]
    assert last[0]["toolResult"]["content"] == [{"text": "18 °C"}]
    assert later["window"]["repaired"] == 1
    # The history itself stays as recorded: repairs appear only in `converse`.
    assert [m["content"][0] for m in later["history"][-2:]] == [
        {"text": "hello? still there?"},
        result("call:abc", "18 °C"),
    ]


def test_a_result_nobody_asked_for_is_recorded_but_left_out_of_the_fragment(api, logs, capsys):
    at = minutes_ago(10)
    ask(api, [{"text": "q"}], at)
    record(api, {"role": "assistant", "text": "Let me check."}, at + timedelta(seconds=1))
    record(api, {"role": "user", "content": [result("ghost", "?")]}, at + timedelta(seconds=2))
    logs.seek(0)
    logs.truncate()
    capsys.readouterr()
    answer = ask(api, [{"text": "so?"}])
    assert answer["history"][-1]["content"] == [result("ghost", "?")]
    assert all(
        "toolResult" not in block
        for message in answer["converse"]["messages"]
        for block in message["content"]
    )
    assert answer["window"]["repaired"] == 1
    records = log_lines(logs.getvalue() + capsys.readouterr().out)
    (repair,) = [r for r in records if r.get("message") == "converse_fragment_repaired"]
    assert (repair["repair"], repair["toolUseId"], repair["level"]) == (
        "orphan_tool_result",
        "ghost",
        "WARNING",
    )
    assert any(r.get("FragmentRepairs") == [1.0] for r in records if "_aws" in r)


def test_the_omitted_middle_of_a_long_exchange_is_a_gap_until_it_is_folded(api, logs):
    tool_loop(api, 13)
    logs.seek(0)
    logs.truncate()
    ask(api, [{"text": "Thanks."}], minutes_ago(1))
    gaps = [
        r for r in log_lines(logs.getvalue()) if r.get("message") == "converse_history_coverage_gap"
    ]
    assert [g["missingTurns"] for g in gaps] == [4]
    compactor = api.compactor()
    requests = api.received()
    assert requests, "the loop's turns asked for a compaction"
    context = LambdaContextStandIn(function_name="compactor-local")
    assert compactor.lambda_handler({"Records": requests}, context) == {"batchItemFailures": []}
    logs.seek(0)
    logs.truncate()
    answer = ask(api, [{"text": "And clause 8?"}])
    assert answer["memory"] is not None
    assert not [
        r for r in log_lines(logs.getvalue()) if r.get("message") == "converse_history_coverage_gap"
    ]


def test_the_openapi_document_describes_repairs_and_converses_tool_ids(api):
    status, document = api.request("GET", "/openapi.json")
    assert status == 200
    schemas = document["components"]["schemas"]
    assert "repaired" in schemas["WindowView"]["required"]
    tool_use_id = schemas["ToolUse"]["properties"]["toolUseId"]
    assert tool_use_id["pattern"] == "^[a-zA-Z0-9_.:-]{1,64}$"
    assert "functions.get_weather:0" in tool_use_id["description"]


# -- the property ----------------------------------------------------------------------


@st.composite
def recorded_conversations(draw: st.DrawFn) -> list[Recorded]:
    # Sizes within the store's item limit for every shape; gaps of days, so some turns fall
    # out of the history range or past their retention.
    sizes = st.one_of(st.integers(1, 80), st.integers(80, 1500), st.integers(1500, 5000))
    return draw(tool_conversations(max_exchanges=5, sizes=sizes, long_gaps=True))


@given(recorded_conversations())
@through_the_api(share=4)
def test_every_answer_to_a_random_tool_conversation_is_valid_for_converse(api, conversation):
    # A fresh table each time: the emulator copies the table on every transaction.
    api.dynamodb.delete_table(TableName=TABLE)
    create_table(api.dynamodb, TABLE)
    now = datetime.now(UTC) - timedelta(minutes=1)
    total = sum((m.gap for m in conversation), timedelta())
    at = now - total
    for message in conversation:
        at += message.gap
        if message.route == "converse":
            answer = ask(api, message.content, at)
            assert answer["window"]["kept"] <= 25
        else:
            record(api, message.body(), at)
    final = ask(api, [{"text": "one more thing"}])
    assert final["converse"]["messages"][-1]["content"][-1] == {"text": "one more thing"}
    # The newest recorded message is a minute old, in range: the history is never empty.
    assert final["history"]
    answers = 1 + sum(1 for message in conversation if message.route == "converse")
    tally("Tool conversations: handler", inputs_tried=answers)


def test_the_fold_trigger_counts_a_tool_call_as_its_json_text(api):
    at = minutes_ago(10)
    ask(api, [{"text": "abcd"}], at)
    block = call("draft:1", body="d" * 8_000)
    record(api, {"role": "assistant", "content": [block]}, at + timedelta(seconds=1))
    status, memory = api.request("GET", path("memory"))
    assert status == 200
    as_json = json.dumps(block, separators=(",", ":"))
    # "abcd" is one token; the call, its compact JSON, every character counted: 8,046
    # letters (13 units: the d's, the keys, the id's and the name's), the id's digit (32),
    # 30 quotes, colons and braces (16) and the name's underscore (64).
    kinds = [c.isalpha() for c in as_json], [c.isdigit() for c in as_json]
    assert (sum(kinds[0]), sum(kinds[1]), len(as_json)) == (8_046, 1, 8_046 + 1 + 30 + 1)
    assert memory["counters"]["unfoldedTokens"] == 1 + -(-(8_046 * 13 + 32 + 30 * 16 + 64) // 64)
