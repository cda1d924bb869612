"""A converse message of tool results alone: the agent's loop going on through converse.

Accepted when every result answers a call still pending (the newest assistant
message's calls not answered since); refused, naming the result, when one
answers nothing, with nothing written. It is not the contact's own words: it
counts towards neither the turn cap nor the rate limit.
"""

from __future__ import annotations

from typing import Any

import pytest

from converse_history.api_models import ConverseResponse
from memory_core.repairs import NO_RESULT_RECORDED
from tests.integration.conftest import Api
from tests.support.converse_validator import assert_valid_for_converse

QUESTION = "What is the weather in Lisbon?"


def path(route: str, tenant: str) -> str:
    return f"/v1/tenants/{tenant}/contacts/c1/{route}"


def call(tool_use_id: str) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": "weather", "input": {"city": "Lisbon"}}}


def result(tool_use_id: str, text: str = "21 °C, sunny") -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "content": [{"text": text}]}}


def converse(api: Api, message: dict[str, Any], tenant: str = "acme") -> tuple[int, Any]:
    return api.request("POST", path("converse", tenant), {"message": message})


def answered(api: Api, message: dict[str, Any], tenant: str = "acme") -> dict[str, Any]:
    status, answer = converse(api, message, tenant)
    assert status == 200, answer
    ConverseResponse.model_validate(answer)
    assert_valid_for_converse(answer["converse"])
    return dict(answer)


def calls(api: Api, *tool_use_ids: str, tenant: str = "acme") -> None:
    body = {"role": "assistant", "content": [call(i) for i in tool_use_ids]}
    status, answer = api.request("POST", path("turns", tenant), body)
    assert status == 201, answer


def test_results_answering_the_pending_call_are_the_next_message(api: Api) -> None:
    answered(api, {"text": QUESTION})
    calls(api, "w1")
    answer = answered(api, {"content": [result("w1")]})
    assert answer["decision"] == "model"
    assert answer["current"] == {"role": "user", "content": [result("w1")]}
    assert answer["history"] == [
        {"role": "user", "content": [{"text": QUESTION}]},
        {"role": "assistant", "content": [call("w1")]},
    ]
    last = answer["converse"]["messages"][-1]
    assert last == {"role": "user", "content": [result("w1")]}
    assert answer["window"]["repaired"] == 0
    # Not the contact's words: the turn cap's count stays at the question's.
    assert answer["turnCount"] == 1

    api.request("POST", path("turns", "acme"), {"role": "assistant", "text": "It is sunny."})
    after = answered(api, {"text": "Thanks!"})
    assert [m["role"] for m in after["history"]] == ["user", "assistant", "user", "assistant"]
    assert after["history"][2] == {"role": "user", "content": [result("w1")]}
    assert after["turnCount"] == 2


def test_parallel_calls_answered_over_two_messages(api: Api) -> None:
    answered(api, {"text": QUESTION})
    calls(api, "w1", "w2")
    first = answered(api, {"content": [result("w2")]})
    # The other call is still pending in this fragment: answered for the model, counted.
    assert first["converse"]["messages"][-1]["content"][0]["toolResult"]["toolUseId"] == "w1"
    assert NO_RESULT_RECORDED in str(first["converse"]["messages"][-1])
    assert first["window"]["repaired"] == 1
    second = answered(api, {"content": [result("w1")]})
    assert second["current"]["content"] == [result("w1")]
    assert second["window"]["repaired"] == 0


def test_results_beside_a_recorded_result_answer_what_is_left(api: Api) -> None:
    answered(api, {"text": QUESTION})
    calls(api, "w1", "w2")
    status, _ = api.request(
        "POST", path("turns", "acme"), {"role": "user", "content": [result("w1")]}
    )
    assert status == 201
    refused, error = converse(api, {"content": [result("w1")]})
    assert refused == 400
    assert error["error"]["message"].startswith("message.content[0].toolResult.toolUseId:")
    answered(api, {"content": [result("w2")]})


@pytest.mark.parametrize(
    ("before", "content", "named"),
    [
        # No call was ever made.
        ([], [result("w1")], 0),
        # The call was answered already.
        (["w1", "answered"], [result("w1")], 0),
        # The contact wrote since: the window closed the call with an error result.
        (["w1", "question"], [result("w1")], 0),
        # One of two results answers nothing.
        (["w1"], [result("w1"), result("w9")], 1),
        # One call answered twice in one message.
        (["w1"], [result("w1"), result("w1")], 1),
    ],
)
def test_results_answering_nothing_are_refused_naming_the_result(
    api: Api, before: list[str], content: list[dict[str, Any]], named: int
) -> None:
    answered(api, {"text": QUESTION})
    if before:
        calls(api, before[0])
    if "answered" in before:
        answered(api, {"content": [result(before[0])]})
    if "question" in before:
        answered(api, {"text": "Are you there?"})
    items = api.items()
    status, error = converse(api, {"content": content})
    assert status == 400, error
    assert error["error"]["code"] == "invalid_request"
    assert error["error"]["message"].startswith(f"message.content[{named}].toolResult.toolUseId: ")
    assert "answers no pending tool call" in error["error"]["message"]
    assert api.items() == items  # nothing written


def test_a_retry_of_results_is_answered_as_the_first_time(api: Api) -> None:
    answered(api, {"text": QUESTION})
    calls(api, "w1")
    message = {"id": "results-1", "content": [result("w1")]}
    first = answered(api, message)
    items = api.items()
    again = answered(api, message)
    assert again == first
    assert api.items() == items


def test_results_count_towards_neither_the_rate_limit_nor_the_cap(api: Api) -> None:
    """`limited` takes 3 messages a minute: a question and its tool loop of four steps."""
    answered(api, {"text": QUESTION}, tenant="limited")
    for step in range(4):
        calls(api, f"w{step}", tenant="limited")
        answer = answered(api, {"content": [result(f"w{step}")]}, tenant="limited")
        assert answer["turnCount"] == 1
    answered(api, {"text": "And tomorrow?"}, tenant="limited")
    answered(api, {"text": "And on Sunday?"}, tenant="limited")
    status, error = converse(api, {"text": "And next week?"}, tenant="limited")
    assert status == 429, error
