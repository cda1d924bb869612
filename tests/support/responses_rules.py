"""Would a Responses request's input be accepted? The openai SDK's own item types, plus
the pairing rules the API enforces, plus what Bedrock needs through LiteLLM.

The shape check validates the items against the openai package's
`ResponseInputItemParam` (pydantic over its TypedDicts) and the members each
kind this project produces must carry. The rules the types cannot state are
the ones the Responses API refuses a request for: a `function_call_output`
whose call is not earlier in the input ("No tool call found for function call
output"), a `function_call` never answered ("No tool output found for function
call"), and a call id used twice. Agents built with the SDK reach Bedrock
through LiteLLM, which sends the items as Converse messages: so the input must
also start with a user message, carry no blank text, and answer a call before
the next user message, as Converse demands.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter, ValidationError

REQUIRED = {
    "function_call": ("call_id", "name", "arguments"),
    "function_call_output": ("call_id", "output"),
    "message": ("role", "content"),
}


@cache
def _items_type() -> TypeAdapter[list[ResponseInputItemParam]]:
    return TypeAdapter(list[ResponseInputItemParam])


def responses_problems(items: list[dict[str, Any]]) -> list[str]:
    """Every reason the input would be refused, or []."""
    problems = _shape_problems(items)
    called: set[str] = set()
    answered: set[str] = set()
    open_calls: list[str] = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        missing = [member for member in REQUIRED.get(kind, ()) if member not in item]
        if missing:
            problems.append(f"items[{index}]: a {kind} without {', '.join(missing)}")
            continue
        if kind == "function_call":
            if item["call_id"] in called:
                problems.append(f"items[{index}]: call id {item['call_id']!r} used twice")
            called.add(item["call_id"])
            open_calls.append(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in called:
                problems.append(
                    f"items[{index}]: No tool call found for function call output with "
                    f"call_id {item['call_id']}"
                )
            answered.add(item["call_id"])
            if item["call_id"] in open_calls:
                open_calls.remove(item["call_id"])
        elif kind == "message":
            if any(not str(text).strip() for text in _texts(item["content"])):
                problems.append(f"items[{index}]: blank text")
            if item["role"] == "user" and open_calls:
                problems.append(
                    f"items[{index}]: a user message before the output of {open_calls[0]} "
                    "(Converse needs a call's result in the very next message)"
                )
                open_calls.clear()
    for call_id in sorted(called - answered):
        problems.append(f"No tool output found for function call {call_id}")
    if items and not (items[0].get("type", "message") == "message" and items[0]["role"] == "user"):
        problems.append("items[0]: the conversation must start with a user message (Converse)")
    return problems


def _shape_problems(items: list[dict[str, Any]]) -> list[str]:
    try:
        _items_type().validate_python(items)
    except ValidationError as error:
        return [f"not Responses input items: {error.error_count()} errors"]
    return []


def _texts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [content]
    return [part.get("text", "") for part in content]
