"""Always valid for Converse (SPEC 5.5.9): the fragment's tool blocks repaired, each counted.

Converse takes a `toolUse` only if the very next message answers it with a
`toolResult` of the same id, a `toolResult` only if the message before it
asked for it, and (on Claude) tool results only before any text in their
message. What was recorded need not be so: a tool crashed and its result
never came, the contact wrote while a call was pending, a result names an id
nobody asked for. Each such spot is mended here, in the fragment only (the
history stays as recorded), and every mend is reported: none is silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memory_core.turns import ContentBlock

NO_RESULT_RECORDED = "No result was recorded for this tool call."

RepairKind = Literal[
    "missing_tool_result",
    "orphan_tool_result",
    "duplicate_tool_result",
    "duplicate_tool_use",
    "tool_results_moved_first",
]


@dataclass(frozen=True, slots=True)
class Repair:
    kind: RepairKind
    message_index: int
    """The repaired message's index in the fragment's `messages`."""
    tool_use_id: str | None = None


Message = dict[str, Any]


def repair_tool_blocks(messages: Sequence[Message]) -> tuple[list[Message], list[Repair]]:
    """The messages with every tool call answered next, and nothing answering no call.

    `messages` alternate in role already (same-role turns merged). A `user`
    message left empty by the repairs is dropped, and the `assistant`
    messages around it merge, so the roles still alternate.
    """
    if not any(_has_tool_blocks(message) for message in messages):
        return list(messages), []
    repaired: list[Message] = []
    repairs: list[Repair] = []
    for message in messages:
        if message["role"] == "assistant":
            if repaired and repaired[-1]["role"] == "assistant":
                previous = repaired[-1]
                repaired[-1] = {**previous, "content": [*previous["content"], *message["content"]]}
            else:
                repaired.append(message)
            continue
        asked = _tool_use_ids(repaired[-1]) if repaired else []
        content = _answer(message["content"], asked, len(repaired), repairs)
        if content:
            repaired.append({"role": "user", "content": content})
    # Duplicate calls are found last: merging may have put two calls of one id together.
    for index, message in enumerate(repaired):
        if message["role"] == "assistant":
            repaired[index] = _unique_calls(message, index, repairs)
    return repaired, repairs


def _answer(
    content: Sequence[ContentBlock], asked: Sequence[str], index: int, repairs: list[Repair]
) -> list[ContentBlock]:
    """A user message's blocks: a result for every call asked, first; no other result."""
    results: list[ContentBlock] = []
    others: list[ContentBlock] = []
    answered: set[str] = set()
    result_after_other = False
    for block in content:
        if "toolResult" not in block:
            others.append(block)
            continue
        tool_use_id = block["toolResult"]["toolUseId"]
        if tool_use_id not in asked:
            repairs.append(Repair("orphan_tool_result", index, tool_use_id))
        elif tool_use_id in answered:
            repairs.append(Repair("duplicate_tool_result", index, tool_use_id))
        else:
            answered.add(tool_use_id)
            results.append(block)
            result_after_other = result_after_other or bool(others)
    missing = [tool_use_id for tool_use_id in asked if tool_use_id not in answered]
    for tool_use_id in missing:
        repairs.append(Repair("missing_tool_result", index, tool_use_id))
    if result_after_other:
        repairs.append(Repair("tool_results_moved_first", index))
    return [*(_no_result(tool_use_id) for tool_use_id in missing), *results, *others]


def _unique_calls(message: Message, index: int, repairs: list[Repair]) -> Message:
    seen: set[str] = set()
    content: list[ContentBlock] = []
    for block in message["content"]:
        if "toolUse" in block:
            tool_use_id = block["toolUse"]["toolUseId"]
            if tool_use_id in seen:
                repairs.append(Repair("duplicate_tool_use", index, tool_use_id))
                continue
            seen.add(tool_use_id)
        content.append(block)
    if len(content) == len(message["content"]):
        return message
    return {**message, "content": content}


def _tool_use_ids(message: Message) -> list[str]:
    if message["role"] != "assistant":
        return []
    ids: list[str] = []
    for block in message["content"]:
        if "toolUse" in block and block["toolUse"]["toolUseId"] not in ids:
            ids.append(block["toolUse"]["toolUseId"])
    return ids


def _no_result(tool_use_id: str) -> ContentBlock:
    return {
        "toolResult": {
            "toolUseId": tool_use_id,
            "content": [{"text": NO_RESULT_RECORDED}],
            "status": "error",
        }
    }


def _has_tool_blocks(message: Message) -> bool:
    return any("toolUse" in block or "toolResult" in block for block in message["content"])
