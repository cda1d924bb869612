"""Bedrock Converse as the workflow's SDK integration calls it, refusing what Bedrock refuses.

The request arrives with the SDK integration's member names (`ModelId`,
`Messages`, `Role`, `Content`, `Text`); it is read back into Converse's names
and checked with botocore's own model and Bedrock's conversation rules
(`tests/support/converse_validator.py`), plus the rule a fragment alone cannot
show: tool blocks need a `toolConfig`. A refusal is the SDK integration's
error, `BedrockRuntime.ValidationException`. The stand-in can be told to
throttle a number of times, to fail with any error, or to answer with a
reasoning block before its text, or with no text at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support.converse_validator import converse_problems
from tests.support.local_state_machine import TaskFailed

# Documents the caller owns: their keys are not member names.
_DOCUMENTS = {"Input", "Json"}
TOOL_CONFIG_REQUIRED = (
    "The toolConfig field must be defined when using toolUse and toolResult content blocks."
)


def converse_names(value: Any) -> Any:
    if isinstance(value, list):
        return [converse_names(item) for item in value]
    if isinstance(value, dict):
        return {
            key[:1].lower() + key[1:]: item if key in _DOCUMENTS else converse_names(item)
            for key, item in value.items()
        }
    return value


@dataclass
class BedrockStandIn:
    reply: str = "Clause 9 applies from signature."
    throttle_times: int = 0
    fail_with: tuple[str, str] | None = None
    reasoning_first: bool = False
    no_text: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, task_input: dict[str, Any]) -> dict[str, Any]:
        request = converse_names(task_input)
        self.requests.append(request)
        if self.throttle_times:
            self.throttle_times -= 1
            raise TaskFailed("BedrockRuntime.ThrottlingException", "Too many requests")
        if self.fail_with:
            raise TaskFailed(*self.fail_with)
        problems = converse_problems(
            {key: request[key] for key in ("system", "messages") if key in request}
        )
        if not request.get("modelId"):
            problems.append("modelId: missing")
        if _has_tool_blocks(request) and "toolConfig" not in request:
            problems.append(TOOL_CONFIG_REQUIRED)
        if problems:
            raise TaskFailed("BedrockRuntime.ValidationException", "; ".join(problems))
        content: list[dict[str, Any]] = []
        if self.reasoning_first:
            content.append({"ReasoningContent": {"ReasoningText": {"Text": "Let me think."}}})
        if not self.no_text:
            content.append({"Text": self.reply})
        return {
            "Output": {"Message": {"Role": "assistant", "Content": content}},
            "StopReason": "max_tokens" if self.no_text else "end_turn",
            "Usage": {"InputTokens": 10, "OutputTokens": 5, "TotalTokens": 15},
            "Metrics": {"LatencyMs": 1},
        }

    @property
    def last_messages(self) -> list[dict[str, Any]]:
        return list(self.requests[-1]["messages"])


def _has_tool_blocks(request: dict[str, Any]) -> bool:
    return any(
        "toolUse" in block or "toolResult" in block
        for message in request.get("messages", [])
        for block in message.get("content", [])
    )
