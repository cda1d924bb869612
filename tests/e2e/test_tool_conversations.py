"""Tool conversations over HTTP against `make run`'s runner: every fragment valid for Converse."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given

from tests.e2e.runner_process import Runner
from tests.support.converse_validator import assert_valid_for_converse
from tests.support.reliability import tally
from tests.support.tool_conversations import through_the_api, tool_conversations

QUESTION = "What changed in clause 7 since March?"


def _contact() -> str:
    return f"tools-{uuid.uuid4().hex[:12]}"


def _send(runner: Runner, contact: str, route: str, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, answer = runner.request("POST", f"/v1/tenants/demo/contacts/{contact}/{route}", body)
    return status, answer


def _recorded(runner: Runner, contact: str, body: dict[str, Any]) -> None:
    status, answer = _send(runner, contact, "turns", body)
    assert status == 201, answer


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
        _recorded(shared_runner, contact, {"role": "assistant", "content": [{"toolUse": call}]})
        result = {"toolUseId": f"functions.lookup:{n}", "content": [{"json": {"version": n}}]}
        _recorded(shared_runner, contact, {"role": "user", "content": [{"toolResult": result}]})
    _recorded(shared_runner, contact, {"role": "assistant", "text": "It changed twice."})
    answer = _checked(*_send(shared_runner, contact, "converse", {"message": {"text": "Thanks"}}))
    assert answer["history"][0]["content"] == [
        {"text": QUESTION},
        {"text": "… 4 messages of this exchange omitted …"},
    ]
    assert answer["window"]["kept"] == 24


@given(tool_conversations(max_exchanges=4))
@through_the_api(share=12)
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
