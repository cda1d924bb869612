"""Tool conversations over HTTP against `make run`'s runner: every fragment valid for Converse."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings

from tests.e2e.runner_process import Runner
from tests.support.converse_validator import assert_valid_for_converse
from tests.support.reliability import tally
from tests.support.tool_conversations import tool_conversations

QUESTION = "What changed in clause 7 since March?"


def _contact() -> str:
    return f"tools-{uuid.uuid4().hex[:12]}"


def _send(runner: Runner, contact: str, route: str, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, answer = runner.request("POST", f"/v1/tenants/demo/contacts/{contact}/{route}", body)
    return status, answer


def _checked(status: int, answer: Any) -> Any:
    assert status == 200, answer
    if answer["decision"] == "model":
        assert_valid_for_converse(answer["converse"])
    return answer


def test_a_13_pair_tool_loop_keeps_its_question_and_a_valid_fragment(shared_runner: Runner):
    contact = _contact()
    _checked(*_send(shared_runner, contact, "converse", {"message": {"text": QUESTION}}))
    for n in range(13):
        call = {"toolUseId": f"functions.lookup:{n}", "name": "lookup", "input": {"clause": 7}}
        assert (
            _send(
                shared_runner,
                contact,
                "turns",
                {"role": "assistant", "content": [{"toolUse": call}]},
            )[0]
            == 201
        )
        result = {"toolUseId": f"functions.lookup:{n}", "content": [{"json": {"version": n}}]}
        assert (
            _send(
                shared_runner,
                contact,
                "turns",
                {"role": "user", "content": [{"toolResult": result}]},
            )[0]
            == 201
        )
    _send(shared_runner, contact, "turns", {"role": "assistant", "text": "It changed twice."})
    answer = _checked(*_send(shared_runner, contact, "converse", {"message": {"text": "Thanks"}}))
    assert answer["history"][0]["content"] == [
        {"text": QUESTION},
        {"text": "… 4 messages of this exchange omitted …"},
    ]
    assert answer["window"]["kept"] == 24


@given(tool_conversations(max_exchanges=4))
@settings(
    max_examples=settings().max_examples // 12,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
def test_every_answer_over_http_is_valid_for_converse(shared_runner: Runner, conversation):
    contact = _contact()
    for message in conversation:
        route = "converse" if message.route == "converse" else "turns"
        status, answer = _send(shared_runner, contact, route, message.body())
        if route == "converse":
            _checked(status, answer)
        else:
            assert status == 201, answer
    _checked(*_send(shared_runner, contact, "converse", {"message": {"text": "one more thing"}}))
    answers = 1 + sum(1 for message in conversation if message.route == "converse")
    tally("Tool conversations: HTTP", inputs_tried=answers)
