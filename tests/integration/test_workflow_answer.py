"""The direct invocation's answer for the Step Functions workflow (`"for": "workflow"`)."""

from __future__ import annotations

import io
from typing import Any

from local.proxy_events import LambdaContextStandIn
from memory_core.workflow_input import MODEL_INPUT_LIMIT_BYTES, json_bytes
from tests.integration.conftest import Api, log_lines


def for_the_workflow(api: Api, message: Any, contact: str = "c1", **extra: Any) -> Any:
    event = {
        "action": "converse",
        "for": "workflow",
        "tenantId": "acme",
        "contactId": contact,
        "message": message,
        **extra,
    }
    return api.handler.lambda_handler(event, LambdaContextStandIn())


def recorded(api: Api, role: str, content: list[dict[str, Any]], contact: str = "c1") -> None:
    status, _ = api.request(
        "POST", f"/v1/tenants/acme/contacts/{contact}/turns", {"role": role, "content": content}
    )
    assert status == 201


def test_the_answer_is_the_workflows_next_state_and_nothing_more(api):
    api.converse("Is clause 8 binding?")
    api.reply("Yes, from signature.")
    state = for_the_workflow(api, {"text": "And clause 9?"})
    assert set(state) == {"tenantId", "contactId", "decision", "reason", "turnCount", "model"}
    assert (state["tenantId"], state["contactId"], state["decision"]) == ("acme", "c1", "model")
    assert state["model"]["input"]["Messages"] == [
        {"Role": "user", "Content": [{"Text": "Is clause 8 binding?"}]},
        {
            "Role": "assistant",
            "Content": [{"Text": "Yes, from signature."}, {"CachePoint": {"Type": "default"}}],
        },
        {"Role": "user", "Content": [{"Text": "And clause 9?"}]},
    ]


def test_an_escalation_carries_no_model_input(make_api):
    api = make_api()
    for index in range(25):
        api.converse(f"message {index}")
    state = for_the_workflow(api, {"text": "one more"})
    assert state == {
        "tenantId": "acme",
        "contactId": "c1",
        "decision": "escalate",
        "reason": "turn_cap",
        "turnCount": 26,
    }


def test_a_message_without_an_id_is_recorded_under_the_drawn_one_and_a_retry_replays_it(api):
    first = for_the_workflow(api, {"text": "hello"}, defaultMessageId="drawn-1")
    again = for_the_workflow(api, {"text": "hello"}, defaultMessageId="drawn-1")
    assert again == first
    _, memory = api.request("GET", "/v1/tenants/acme/contacts/c1/memory")
    assert (memory["counters"]["turnsRecorded"], first["turnCount"]) == (1, 1)
    assert [item["turnId"]["S"] for item in api.turn_items()] == ["drawn-1"]


def test_the_callers_own_message_id_wins_over_the_drawn_one(api):
    for_the_workflow(api, {"id": "mine", "text": "hello"}, defaultMessageId="drawn-1")
    assert [item["turnId"]["S"] for item in api.turn_items()] == ["mine"]


def test_a_drawn_id_that_is_not_a_message_id_is_refused_naming_it(api):
    answer = for_the_workflow(api, {"text": "hello"}, defaultMessageId="not an id")
    assert (answer["statusCode"], answer["error"]["code"]) == (400, "invalid_request")
    assert answer["error"]["message"].startswith("defaultMessageId")
    assert api.items() == []


def test_tool_turns_reach_the_workflows_model_as_text_while_the_api_keeps_the_blocks(api):
    api.converse("What is the weather in Lyon?")
    call = {"toolUse": {"toolUseId": "w1", "name": "get_weather", "input": {"city": "Lyon"}}}
    recorded(api, "assistant", [{"text": "Checking."}, call])
    result = {"toolResult": {"toolUseId": "w1", "content": [{"json": {"celsius": 21}}]}}
    recorded(api, "user", [result])
    api.reply("21°C and sunny.")
    state = for_the_workflow(api, {"text": "Tomorrow?"})
    messages = state["model"]["input"]["Messages"]
    assert messages[1]["Content"] == [
        {"Text": "Checking."},
        {"Text": '[tool call w1: get_weather]\n{"city":"Lyon"}'},
    ]
    assert messages[2]["Content"] == [{"Text": '[tool result w1]\n{"celsius":21}'}]
    _, over_http = api.converse("Tomorrow?", contact="c2")
    assert "toolUse" not in str(over_http)  # another contact: nothing shared
    _, same = api.request(
        "POST", "/v1/tenants/acme/contacts/c1/converse", {"message": {"text": "And Paris?"}}
    )
    assert same["converse"]["messages"][1]["content"][1] == call


def test_a_message_the_workflow_cannot_carry_is_refused_before_anything_is_written(api):
    message = {"text": "条" * 90_000}  # 270 KB of UTF-8: accepted by the API, not by a state
    answer = for_the_workflow(api, message)
    assert (answer["statusCode"], answer["error"]["code"]) == (413, "message_too_large")
    assert answer["error"]["message"].startswith("message:")
    assert api.items() == []
    status, _ = api.converse("", message=message)
    assert status == 200


def test_a_long_cjk_history_is_shortened_to_fit_with_a_marker_and_a_warning(api, logs: io.StringIO):
    for index in range(6):
        api.converse(f"{index}" + "問" * 4000)
        api.reply(f"{index}" + "答" * 4000)
    # Trimmed by tokens, a CJK history holds some 800 characters a message: the current
    # message is most of what the state can hold.
    state = for_the_workflow(api, {"text": "長" * 80_000})
    assert json_bytes(state) <= MODEL_INPUT_LIMIT_BYTES + 1024
    first = state["model"]["input"]["Messages"][0]["Content"][0]["Text"]
    assert first.startswith("… ")
    assert "omitted to fit the workflow's 256 KiB state" in first
    assert state["model"]["input"]["Messages"][-1]["Content"][-1] == {"Text": "長" * 80_000}
    lines = log_lines(logs.getvalue())
    [shortened] = [line for line in lines if line["message"] == "workflow_input_shortened"]
    assert shortened["level"] == "WARNING"
    assert (shortened["tenant"], shortened["contact"]) == ("acme", "c1")
    assert "長" not in logs.getvalue()
    assert (shortened["omittedMessages"], shortened["memoryOmitted"]) >= (2, False)
