"""The OpenAI Agents session's conversions, as properties over every shape a window takes.

A window (the service's Converse messages) becomes Responses input items that
the Responses rules accept, whatever the blocks' order: text before and after
tool calls, parallel calls, a contact's text beside the results it returns,
cache points anywhere. And what the SDK saves converts back to the blocks it
came from: the session records what the framework produced.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conversation_memory_client.openai_agents import (
    _message_blocks,
    _responses_items,
    _turns_of,
)
from tests.support.responses_rules import responses_problems

CACHE_POINT = {"cachePoint": {"type": "default"}}

words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1).filter(
    lambda text: bool(text.strip())
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
tool_inputs = st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=3)


@st.composite
def exchanges(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A question, then rounds of an assistant reply (text and parallel calls in any order)
    answered by a user message (the results first, then maybe text); cache points after
    any block."""
    counter = iter(range(10_000))
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": draw(words)}]}]
    for _ in range(draw(st.integers(1, 4))):
        calls = [
            {
                "toolUse": {
                    "toolUseId": f"call_{next(counter)}",
                    "name": draw(st.sampled_from(["look_up", "weigh", "refund"])),
                    "input": draw(tool_inputs),
                }
            }
            for _ in range(draw(st.integers(0, 3)))
        ]
        texts = [{"text": draw(words)} for _ in range(draw(st.integers(0 if calls else 1, 2)))]
        reply: list[dict[str, Any]] = draw(st.permutations([*calls, *texts]))
        messages.append({"role": "assistant", "content": _with_cache_points(draw, reply)})
        results = [
            {
                "toolResult": {
                    "toolUseId": call["toolUse"]["toolUseId"],
                    "content": [{"text": draw(words)}],
                    **({"status": "error"} if draw(st.booleans()) else {}),
                }
            }
            for call in calls
        ]
        said = [{"text": draw(words)} for _ in range(draw(st.integers(0 if results else 1, 2)))]
        messages.append({"role": "user", "content": _with_cache_points(draw, [*results, *said])})
    return messages


def _with_cache_points(draw: st.DrawFn, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    marked: list[dict[str, Any]] = []
    for block in blocks:
        marked.append(block)
        if draw(st.booleans()) and draw(st.booleans()):
            marked.append(dict(CACHE_POINT))
    return marked


@given(exchanges())
def test_any_window_becomes_input_the_responses_rules_accept(messages):
    items = _responses_items(messages)
    assert responses_problems(items) == []
    calls = [block["toolUse"] for m in messages for block in m["content"] if "toolUse" in block]
    converted = [item for item in items if item.get("type") == "function_call"]
    assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in converted] == [
        (call["toolUseId"], call["name"], call["input"]) for call in calls
    ]


@given(exchanges())
def test_every_reply_and_its_results_convert_back_to_the_blocks_they_came_from(messages):
    """The items the SDK saves of a response and its tools' outputs are the blocks the
    service stores: text, toolUse with the same input, toolResult with the same text."""
    for reply, answer in zip(messages[1::2], messages[2::2], strict=True):
        items = _responses_items([reply, answer])
        outputs_and_reply = [item for item in items if item.get("role") != "user"]
        turns = _turns_of(outputs_and_reply)
        own = [b for b in reply["content"] if "cachePoint" not in b]
        results = [
            {
                "toolResult": {
                    "toolUseId": b["toolResult"]["toolUseId"],
                    "content": b["toolResult"]["content"],
                }
            }
            for b in answer["content"]
            if "toolResult" in b
        ]
        assert turns == [("assistant", own), *([("user", results)] if results else [])]


@given(st.lists(words, min_size=1, max_size=3))
def test_the_contacts_text_parts_are_its_message_in_order(parts):
    item = {"role": "user", "content": [{"type": "input_text", "text": p} for p in parts]}
    assert _message_blocks(item) == [{"text": p} for p in parts]
    assert _message_blocks({"role": "user", "content": parts[0]}) == [{"text": parts[0]}]


def test_a_part_the_service_cannot_store_is_refused_by_its_type():
    item = {"role": "user", "content": [{"type": "input_file", "file_id": "f-1"}]}
    with pytest.raises(ValueError, match="not input_file"):
        _message_blocks(item)


def test_reasoning_is_left_out_and_a_hosted_tools_call_is_named_in_the_log(
    caplog: pytest.LogCaptureFixture,
):
    items: list[dict[str, Any]] = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "message", "role": "assistant", "content": "Found it."},
    ]
    with caplog.at_level("WARNING"):
        assert _turns_of(items) == [("assistant", [{"text": "Found it."}])]
    assert [record.getMessage() for record in caplog.records] == [
        "a web_search_call item is not recorded: the service keeps messages, function calls "
        "and their outputs"
    ]
