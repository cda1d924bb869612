"""The converse fragment as the workflow's model takes it: tools as text, within a state.

The converse workflow calls Bedrock with no tools of its own: it runs none, so
a model offered tools could ask for a call nobody makes. Converse refuses
`toolUse`/`toolResult` blocks without a `toolConfig`, so the tool turns an
agent recorded through the API are shown to this model as text: what was
called, with what, and what came back.

Step Functions carries the fragment from the history Lambda to Bedrock in the
execution's state, which holds at most 256 KiB of UTF-8 JSON and fails the
execution, uncatchably, beyond. The fragment keeps the current message whole
(it is never trimmed) and gives up its oldest messages, then the memory, with
a visible marker, only when the whole would not fit. A current message that
cannot fit even alone is refused before anything is recorded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.converse_shape import sdk_member_names

STATE_LIMIT_BYTES = 256 * 1024
# What the state holds beside the model's input: the conversation's ids, the
# decision, and the error a failing step's Catch adds to it.
STATE_MARGIN_BYTES = 8 * 1024
MODEL_INPUT_LIMIT_BYTES = STATE_LIMIT_BYTES - STATE_MARGIN_BYTES
# A count no omission reaches: the marker at its longest, for the room it takes.
_WIDEST_COUNT = 10**9


def omitted_for_size_marker(messages: int, memory: bool) -> str:
    parts = [f"{messages} earlier message{'s' if messages != 1 else ''}"] if messages else []
    if memory:
        parts.append("the conversation's summary")
    return f"… {' and '.join(parts)} omitted to fit the workflow's 256 KiB state …"


@dataclass(frozen=True, slots=True)
class ModelInput:
    """`System` and `Messages` as the SDK integration names them, and what was left out."""

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    omitted_messages: int = 0
    memory_omitted: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"System": self.system, "Messages": self.messages}

    @property
    def size(self) -> int:
        return json_bytes(self.as_json())


def json_bytes(value: Any) -> int:
    """The UTF-8 size of `value` as compact JSON, the measure of Step Functions' state limit."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))


def tools_as_text(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every tool block as a text block saying the same; other blocks as they are."""
    return [
        {"role": message["role"], "content": [_as_text(block) for block in message["content"]]}
        for message in messages
    ]


def _as_text(block: Mapping[str, Any]) -> dict[str, Any]:
    if "toolUse" in block:
        call = block["toolUse"]
        return {
            "text": f"[tool call {call['toolUseId']}: {call['name']}]\n{_compact(call['input'])}"
        }
    if "toolResult" in block:
        result = block["toolResult"]
        failed = " (error)" if result.get("status") == "error" else ""
        items = [
            item["text"] if "text" in item else _compact(item.get("json"))
            for item in result["content"]
        ]
        return {"text": "\n".join([f"[tool result {result['toolUseId']}{failed}]", *items])}
    return dict(block)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def current_fits(current: Mapping[str, Any], limit: int = MODEL_INPUT_LIMIT_BYTES) -> bool:
    """Whether the current message, alone with the omission marker, fits the model's input."""
    marked = _with_marker(tools_as_text([current])[0], _WIDEST_COUNT, memory=True)
    alone = _sdk_input([], [marked])
    return alone.size <= limit


def model_input(
    fragment: Mapping[str, Any],
    current: Sequence[Mapping[str, Any]],
    limit: int = MODEL_INPUT_LIMIT_BYTES,
) -> ModelInput:
    """The workflow's model input from a Converse fragment ({"system", "messages"}).

    The fragment is already valid for Converse (first message `user`, roles
    alternating, the last one holding the `current` message's blocks); tools
    become text, and while the whole is over `limit` the oldest exchange goes,
    then the memory, then the blocks of an unanswered question merged into the
    current message. The current message's own blocks never go: `current_fits`
    refuses, before anything is recorded, one that cannot fit.
    """
    system = list(fragment.get("system", []))
    messages = tools_as_text(fragment["messages"])
    whole = _sdk_input(system, messages)
    if whole.size <= limit:
        return whole
    omitted = 0
    while len(messages) > 1 and _fitted(system, messages, omitted, False).size > limit:
        # Two at a time: the history starts on `user` and roles alternate.
        messages, omitted = messages[2:], omitted + 2
    memory_omitted = bool(system) and _fitted(system, messages, omitted, False).size > limit
    if memory_omitted:
        system = []
    if len(messages) == 1:
        messages, omitted = _merged_question_left_out(
            messages[0],
            current,
            omitted,
            lambda message, count: _fitted(system, [message], count, memory_omitted).size <= limit,
        )
    return _fitted(system, messages, omitted, memory_omitted)


def _merged_question_left_out(
    last: dict[str, Any],
    current: Sequence[Mapping[str, Any]],
    omitted: int,
    fits: Callable[[dict[str, Any], int], bool],
) -> tuple[list[dict[str, Any]], int]:
    """The last message without the oldest blocks that are not the current message's.

    Repairs move tool results first, so the current message's blocks need not be
    the last ones: they are told by their content, matched from the end, where
    the current message was merged. A cache point is no message: it is never
    counted as omitted, and it stays only while a block of the history stays
    before it. It marks a prefix of the history; once none is left it would only
    add its bytes to a current message `current_fits` measured without them.
    """
    protected = Counter(_key(_as_text(block)) for block in current)
    history = set()
    for position, block in reversed(list(enumerate(last["content"]))):
        if "cachePoint" in block:
            continue
        if protected[_key(block)]:
            protected[_key(block)] -= 1
        else:
            history.add(position)
    content = list(last["content"])
    gone: set[int] = set()
    for position in sorted(history):
        if fits({"role": last["role"], "content": content}, omitted):
            break
        gone.add(position)
        content = _without(last["content"], gone, history)
        omitted += 1
    return [{"role": last["role"], "content": content}], omitted


def _without(
    content: Sequence[dict[str, Any]], gone: set[int], history: set[int]
) -> list[dict[str, Any]]:
    """`content` without the blocks at `gone`, nor a cache point no kept history block precedes."""
    kept: list[dict[str, Any]] = []
    history_kept = False
    for index, block in enumerate(content):
        if index in gone or ("cachePoint" in block and not history_kept):
            continue
        kept.append(block)
        history_kept = history_kept or index in history
    return kept


def _key(block: Mapping[str, Any]) -> str:
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


def _fitted(
    system: list[dict[str, Any]], messages: list[dict[str, Any]], omitted: int, memory: bool
) -> ModelInput:
    if not omitted and not memory:
        return _sdk_input(system, messages)
    first = _with_marker(messages[0], omitted, memory=memory)
    return _sdk_input(system, [first, *messages[1:]], omitted, memory)


def _with_marker(message: Mapping[str, Any], omitted: int, *, memory: bool) -> dict[str, Any]:
    marker = {"text": omitted_for_size_marker(omitted, memory)}
    return {"role": message["role"], "content": [marker, *message["content"]]}


def _sdk_input(
    system: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    omitted: int = 0,
    memory_omitted: bool = False,
) -> ModelInput:
    return ModelInput(sdk_member_names(system), sdk_member_names(messages), omitted, memory_omitted)
