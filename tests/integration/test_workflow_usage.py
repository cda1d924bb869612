"""The workflow records the model's usage with its reply, and counts it once per tenant.

The synthesized definition runs in aws-local-stepfunctions (as in
test_workflow_execution.py): AskTheModel's ResultSelector must carry Bedrock's
`Usage` whole, with or without its cache members, and RecordTheReply hands it
to the history Lambda, which keeps it on the reply's turn, emits the token
metrics and logs them under the tenant, once, however often the task is retried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.integration.test_reply_usage import counted, logged, stored_usage
from tests.integration.test_workflow_execution import Workflow, definition
from tests.support.bedrock_stand_in import BedrockStandIn
from tests.support.local_state_machine import TaskFailed

__all__ = ["definition"]  # the module's fixture: the stack is synthesised once here too

WITHOUT_CACHE = {"InputTokens": 10, "OutputTokens": 5, "TotalTokens": 15}
WITH_CACHE = {
    "InputTokens": 12,
    "OutputTokens": 7,
    "TotalTokens": 2_067,
    "CacheReadInputTokens": 1_848,
    "CacheWriteInputTokens": 200,
}


@dataclass
class BedrockReportingUsage(BedrockStandIn):
    """The stand-in, answering with the `Usage` it is given (the SDK's member names)."""

    usage: dict[str, Any] = field(default_factory=lambda: dict(WITHOUT_CACHE))

    def __call__(self, task_input: dict[str, Any]) -> dict[str, Any]:
        return {**super().__call__(task_input), "Usage": self.usage}


@pytest.fixture
def workflow(definition: dict[str, Any], api: Any) -> Workflow:
    chosen = Workflow(definition, api)
    chosen.bedrock = BedrockReportingUsage()
    return chosen


def reply_usage_stored(workflow: Workflow) -> list[dict[str, int] | None]:
    """The usage on each assistant turn (the contact's own turns carry none)."""
    items = workflow.api.turn_items()
    assistant = [i for i in items if i["role"]["S"] == "assistant"]
    assert len(assistant) == 1, items
    user = [i for i in items if i["role"]["S"] == "user"]
    assert all("usage" not in i for i in user)
    return [u for u in stored_usage(workflow.api) if u is not None]


@pytest.mark.parametrize(
    ("usage", "stored", "metrics"),
    [
        (
            WITH_CACHE,
            {
                "inputTokens": 12,
                "outputTokens": 7,
                "totalTokens": 2_067,
                "cacheReadInputTokens": 1_848,
                "cacheWriteInputTokens": 200,
            },
            (12, 1_848, 200, 7),
        ),
        (
            WITHOUT_CACHE,
            {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
            (10, 0, 0, 5),
        ),
    ],
    ids=["with-cache", "without-cache"],
)
def test_the_reply_is_recorded_with_the_models_usage_and_counted_for_the_tenant(
    workflow, capsys, usage, stored, metrics
):
    workflow.bedrock.usage = usage
    execution = workflow.run({"text": "And clause 9?"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    [call] = [c for c in execution.task_calls if c.state == "RecordTheReply"]
    assert call.input["modelReply"]["usage"] == usage
    assert reply_usage_stored(workflow) == [stored]
    # The execution's output is the recorded turn, its content only.
    assert set(execution.output["turn"]) == {"id", "role", "sentAt", "content"}
    input_tokens, cache_read, cache_write, output_tokens = metrics
    assert counted(capsys.readouterr().out) == [
        {
            "tenant": None,  # the service's totals: no tenant is named in TENANT_USAGE_METRICS
            "InputTokens": input_tokens,
            "CacheReadInputTokens": cache_read,
            "CacheWriteInputTokens": cache_write,
            "OutputTokens": output_tokens,
        }
    ]


def test_a_record_retried_after_its_commit_counts_the_usage_once(workflow, logs, capsys):
    failed: list[bool] = []

    def fails_once_after_its_commit(payload: dict[str, Any]) -> Any:
        answer = workflow.invoke(payload)
        if not failed:
            failed.append(True)
            raise TaskFailed("Lambda.ServiceException", "after the commit")
        return answer

    workflow.record_lambda = fails_once_after_its_commit
    workflow.bedrock.usage = WITH_CACHE
    execution = workflow.run({"text": "hello"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert execution.attempts("RecordTheReply") == 2
    assert len(reply_usage_stored(workflow)) == 1
    output = logs.getvalue() + capsys.readouterr().out
    assert [c["InputTokens"] for c in counted(output)] == [12]
    assert [(line["tenant"], line["inputTokens"]) for line in logged(output)] == [("acme", 12)]
    assert workflow.counters()["turnsRecorded"] == 2


def test_a_usage_bedrock_reports_oddly_still_records_the_reply(workflow, capsys):
    workflow.bedrock.usage = {"InputTokens": -1, "OutputTokens": 5, "TotalTokens": 4}
    execution = workflow.run({"text": "hello"})
    assert execution.status == "SUCCEEDED", (execution.error, execution.cause)
    assert execution.output["turn"]["content"] == [{"text": workflow.bedrock.reply}]
    assert stored_usage(workflow.api) == [None, None]
    assert counted(capsys.readouterr().out) == []
