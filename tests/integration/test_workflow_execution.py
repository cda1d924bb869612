"""The converse workflow end to end: the synthesized definition, run by a real ASL interpreter.

The stack is synthesized as `cdk synth` does; its state machine definition runs
in aws-local-stepfunctions. The two Lambda tasks run the real history handler
over the in-process AWS emulation, Bedrock is a stand-in that refuses what
Bedrock refuses (`tests/support/bedrock_stand_in.py`), and the EventBridge task
collects its events. Every state's input and output, and every task's
parameters and result, are measured against Step Functions' 256 KiB.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from local.proxy_events import LambdaContextStandIn
from tests.infra.conftest import synthesise
from tests.integration.conftest import Api
from tests.support.bedrock_stand_in import TOOL_CONFIG_REQUIRED, BedrockStandIn
from tests.support.local_state_machine import (
    STATE_PAYLOAD_LIMIT,
    Execution,
    TaskFailed,
    definition_from_template,
    run_state_machine,
)


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(("AWS_", "CDK_DEFAULT"))]:
            patch.delenv(name)
        _stack, template = synthesise()
    return definition_from_template(template.to_json())


class Workflow:
    """One deployment's pieces: the definition, the history Lambda, Bedrock, the bus."""

    def __init__(self, definition: dict[str, Any], api: Api) -> None:
        self.definition = definition
        self.api = api
        self.bedrock = BedrockStandIn()
        self.events: list[dict[str, Any]] = []
        self.history_lambda: Callable[[dict[str, Any]], Any] = self.invoke
        self.record_lambda: Callable[[dict[str, Any]], Any] = self.invoke

    def invoke(self, payload: dict[str, Any]) -> Any:
        return self.api.handler.lambda_handler(payload, LambdaContextStandIn())

    def publish(self, parameters: dict[str, Any]) -> dict[str, Any]:
        self.events.extend(parameters["Entries"])
        return {"Entries": [{"EventId": f"e-{len(self.events)}"}], "FailedEntryCount": 0}

    def run(self, message: Any, tenant: str = "acme", contact: str = "c1") -> Execution:
        execution = run_state_machine(
            self.definition,
            {"tenantId": tenant, "contactId": contact, "message": message},
            {
                "RecordAndWindow": self.history_lambda,
                "AskTheModel": self.bedrock,
                "RecordTheReply": self.record_lambda,
                "PublishEscalation": self.publish,
            },
        )
        assert not execution.task_exceptions, execution.task_exceptions
        largest = execution.largest_state_payload()
        assert largest.size < STATE_PAYLOAD_LIMIT, largest
        return execution

    def counters(self, contact: str = "c1") -> dict[str, Any]:
        status, memory = self.api.request("GET", f"/v1/tenants/acme/contacts/{contact}/memory")
        assert status == 200, memory
        return dict(memory["counters"])


@pytest.fixture
def workflow(definition: dict[str, Any], api: Api) -> Workflow:
    return Workflow(definition, api)


def test_a_plain_chat_is_answered_and_the_reply_recorded(workflow):
    workflow.api.converse("Is clause 8 binding?")
    workflow.api.reply("Yes, from signature.")
    execution = workflow.run({"text": "And clause 9?"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert execution.states_entered()[-1] == "Answered"
    assert execution.output["turn"]["role"] == "assistant"
    assert workflow.bedrock.last_messages[-1] == {
        "role": "user",
        "content": [{"text": "And clause 9?"}],
    }
    _, answer = workflow.api.converse("thanks")
    texts = [m["content"][0]["text"] for m in answer["history"]]
    assert texts[-2:] == ["And clause 9?", "Clause 9 applies from signature."]
    assert workflow.counters()["turnsRecorded"] == 5


def test_the_turn_cap_publishes_an_escalation_and_never_asks_the_model(workflow):
    for index in range(25):
        workflow.api.converse(f"message {index}")
    execution = workflow.run({"text": "one more"})
    assert execution.status == "SUCCEEDED"
    assert execution.states_entered()[-2:] == ["PublishEscalation", "Escalated"]
    [event] = workflow.events
    assert (event["Source"], event["DetailType"]) == (
        "conversation-memory",
        "ConversationEscalated",
    )
    assert event["Detail"] == {
        "tenantId": "acme",
        "contactId": "c1",
        "reason": "turn_cap",
        "turnCount": 26,
    }
    assert workflow.bedrock.requests == []


@pytest.mark.parametrize(
    ("tenant", "message", "error", "cause"),
    [
        ("nobody", {"text": "hi"}, "unknown_tenant", "tenant 'nobody' is not in the rules"),
        ("acme", {"text": "   "}, "invalid_request", "message.text: must not be blank"),
        ("acme", "just text", "invalid_request", "message:"),
    ],
)
def test_a_refusal_ends_in_failed_with_its_code_and_message(
    workflow, tenant, message, error, cause
):
    execution = workflow.run(message, tenant=tenant)
    assert execution.status == "FAILED"
    assert execution.states_entered()[-2:] == ["Refused", "Failed"]
    assert execution.error == error
    assert execution.cause.startswith(cause)
    assert workflow.api.items() == []
    assert execution.attempts("RecordAndWindow") == 1


def test_tool_turns_in_the_history_are_answered(workflow):
    api = workflow.api
    api.converse("What is the weather in Lyon?")
    call = {"toolUse": {"toolUseId": "w1", "name": "get_weather", "input": {"city": "Lyon"}}}
    status, _ = api.request(
        "POST",
        "/v1/tenants/acme/contacts/c1/turns",
        {"role": "assistant", "content": [{"text": "Checking."}, call]},
    )
    assert status == 201
    # The contact writes before the tool's result came: the call is left unanswered.
    execution = workflow.run({"text": "Still there?"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    sent = workflow.bedrock.last_messages
    assert sent[1]["content"][1]["text"].startswith("[tool call w1: get_weather]")
    assert sent[2]["content"][0]["text"].startswith("[tool result w1 (error)]")


def test_the_stand_in_refuses_tool_blocks_without_a_tool_config_as_bedrock_does():
    bedrock = BedrockStandIn()
    request = {
        "ModelId": "amazon.nova-lite-v1:0",
        "Messages": [
            {"Role": "user", "Content": [{"Text": "weather?"}]},
            {
                "Role": "assistant",
                "Content": [{"ToolUse": {"ToolUseId": "w1", "Name": "get", "Input": {"a": 1}}}],
            },
            {
                "Role": "user",
                "Content": [{"ToolResult": {"ToolUseId": "w1", "Content": [{"Text": "21"}]}}],
            },
        ],
    }
    with pytest.raises(TaskFailed) as refused:
        bedrock(request)
    assert refused.value.error == "BedrockRuntime.ValidationException"
    assert TOOL_CONFIG_REQUIRED in refused.value.cause


def test_a_history_step_that_fails_after_its_commit_records_the_message_once(workflow):
    def fails_once_after_its_commit(error: str) -> Callable[[dict[str, Any]], Any]:
        failed: list[str] = []

        def invoke(payload: dict[str, Any]) -> Any:
            answer = workflow.invoke(payload)
            if not failed:
                failed.append(error)
                raise TaskFailed(error, "after the commit")
            return answer

        return invoke

    workflow.history_lambda = fails_once_after_its_commit("Sandbox.Timedout")
    workflow.record_lambda = fails_once_after_its_commit("Lambda.ServiceException")
    execution = workflow.run({"text": "hello"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert execution.attempts("RecordAndWindow") == 2
    assert execution.attempts("RecordTheReply") == 2
    counters = workflow.counters()
    assert counters["turnsRecorded"] == 2
    assert len(workflow.api.turn_items()) == 2


def test_a_100000_character_message_stays_under_the_state_limit(workflow):
    workflow.api.converse("Please review the contract.")
    workflow.api.reply("Send it over.")
    execution = workflow.run({"text": "Article 1. " + "x" * 99_989})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert len(workflow.bedrock.last_messages[-1]["content"][0]["text"]) == 100_000


def test_a_short_message_after_long_cjk_exchanges_stays_under_the_state_limit(workflow):
    for index in range(6):
        workflow.api.converse(f"{index}" + "問" * 4_800)
        workflow.api.reply(f"{index}" + "答" * 4_800)
    execution = workflow.run({"text": "要約してください"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert len(workflow.bedrock.last_messages) >= 11


def test_a_long_cjk_message_after_long_cjk_exchanges_is_answered_with_the_oldest_left_out(
    workflow,
):
    for index in range(6):
        workflow.api.converse(f"{index}" + "問" * 4_800)
        workflow.api.reply(f"{index}" + "答" * 4_800)
    # Trimmed by tokens, a CJK history holds some 800 characters a message: the current
    # message is most of what the state can hold.
    execution = workflow.run({"text": "長" * 80_000})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    sent = workflow.bedrock.last_messages
    assert "omitted to fit the workflow's 256 KiB state" in sent[0]["content"][0]["text"]
    assert sent[-1]["content"][-1] == {"text": "長" * 80_000}


def test_a_message_that_cannot_fit_is_refused_before_anything_is_recorded(workflow):
    execution = workflow.run({"text": "長" * 85_000})  # 255 KB: the input fits, no more
    assert execution.status == "FAILED"
    assert (execution.error, execution.states_entered()[-1]) == ("message_too_large", "Failed")
    assert workflow.api.items() == []


def test_throttling_is_retried_until_the_model_answers(workflow):
    workflow.bedrock.throttle_times = 2
    execution = workflow.run({"text": "hello"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert execution.attempts("AskTheModel") == 3


@pytest.mark.parametrize(
    "error", ["BedrockRuntime.ValidationException", "BedrockRuntime.AccessDeniedException"]
)
def test_a_refusal_from_bedrock_is_not_retried_and_fails_with_its_error(workflow, error):
    workflow.bedrock.fail_with = (error, "refused")
    execution = workflow.run({"text": "hello"})
    assert (execution.status, execution.error, execution.cause) == ("FAILED", error, "refused")
    assert execution.attempts("AskTheModel") == 1
    assert execution.attempts("RecordTheReply") == 0


def test_the_reply_is_the_first_text_block_whatever_comes_before_it(workflow):
    workflow.bedrock.reasoning_first = True
    execution = workflow.run({"text": "hello"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert execution.output["turn"]["content"] == [{"text": workflow.bedrock.reply}]


def test_a_reply_without_text_fails_naming_the_stop_reason(workflow):
    workflow.bedrock.no_text = True
    execution = workflow.run({"text": "hello"})
    assert (execution.status, execution.error) == ("FAILED", "reply_without_text")
    assert "max_tokens" in execution.cause
    assert workflow.counters()["turnsRecorded"] == 1
