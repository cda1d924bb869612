"""Recall as a tool the model calls: its Bedrock Converse `toolSpec`, and its answer.

The window holds the newest turns and the memory only the gist of the older
ones. When the model needs the exact words of something said before the window
(a clause, a figure, an address), it calls `recall_conversation`; the agent
answers that call from the service (`MemoryClient.recall`) with the passages'
exact words. Nothing else about the agent changes: it still converses each
message once, and recall runs only when the model asks for it.

```python
from conversation_memory_client import MemoryClient, answer_recall, recall_tool_spec

memory = MemoryClient.over_http("https://abc123.execute-api.eu-west-1.amazonaws.com/prod/")
result = memory.converse("acme-legal", "c-42", "What did clause 14.2 say about payment?")
fragment = result.converse  # when not result.escalated
messages = fragment["messages"]
while True:
    reply = bedrock.converse(
        modelId=MODEL_ID,
        system=fragment["system"],
        messages=messages,
        toolConfig={"tools": [recall_tool_spec()]},
    )
    message = reply["output"]["message"]
    memory.record("acme-legal", "c-42", role="assistant", content=message["content"],
                  usage=reply["usage"])
    messages.append(message)
    calls = [block for block in message["content"] if "toolUse" in block]
    if not calls:
        break
    results = [answer_recall(memory, "acme-legal", "c-42", block) for block in calls]
    memory.record("acme-legal", "c-42", role="user", content=results)
    messages.append({"role": "user", "content": results})
```

The Strands adapter and the LangChain middleware offer the same tool with
`recall=True`; this module imports no framework.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from conversation_memory_client.client import (
    DEFAULT_RECALL_LIMIT,
    MAX_RECALL_LIMIT,
    MemoryClient,
    check_recall_request,
)
from conversation_memory_client.errors import InvalidRequest, RateLimited
from conversation_memory_client.results import RecallResult

__all__ = [
    "RECALL_TOOL_DESCRIPTION",
    "RECALL_TOOL_NAME",
    "RecallRefused",
    "answer_recall",
    "recall_arguments",
    "recall_input_schema",
    "recall_text",
    "recall_tool_spec",
    "recalled",
]

RECALL_TOOL_NAME = "recall_conversation"

RECALL_TOOL_DESCRIPTION = (
    "Find the exact words of something said earlier in this conversation, before the "
    "messages you can see. The summary of the earlier conversation you were given keeps "
    "only the gist; call this tool when you need the precise wording of an earlier "
    "message: a contract clause, a figure or amount, a date, an address, a reference "
    "number, a name, or a commitment someone made. It searches this conversation only, "
    "by the words of your query (not by meaning), and returns the best-matching earlier "
    "messages word for word, with who said each and when; a long message comes back cut "
    "around the match, a line '… N tokens omitted …' marking each cut. Do not call it "
    "for anything in the messages you can already see, nor for general knowledge."
)
"""Tells the model when to call: exact words it no longer sees, never what it sees."""

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": (
                "Words likely to appear in the passage you need: a clause or section "
                "number, names, figures, distinctive terms (for example "
                "'clause 14.2 indemnify'). Matching is by words, not meaning."
            ),
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_RECALL_LIMIT,
            "description": (
                f"How many passages to return, best match first (default {DEFAULT_RECALL_LIMIT})."
            ),
        },
    },
    "required": ["query"],
}


class RecallRefused(ValueError):
    """The model's call could not be answered (its arguments, or the contact's rate
    limit): the message is for the model, as an error tool result."""


def recall_tool_spec() -> dict[str, Any]:
    """The `recall_conversation` tool as Bedrock Converse takes it in
    `toolConfig={"tools": [...]}`: `{"toolSpec": {"name", "description", "inputSchema"}}`.
    A fresh copy each call, so a caller may change it."""
    return {
        "toolSpec": {
            "name": RECALL_TOOL_NAME,
            "description": RECALL_TOOL_DESCRIPTION,
            "inputSchema": {"json": copy.deepcopy(_INPUT_SCHEMA)},
        }
    }


def recall_input_schema() -> dict[str, Any]:
    """The tool's arguments as JSON Schema (the spec's `inputSchema.json`), for frameworks
    that take the schema alone."""
    return copy.deepcopy(_INPUT_SCHEMA)


def recall_arguments(arguments: Mapping[str, Any]) -> tuple[str, int]:
    """The query and limit of a model's call, or `RecallRefused` naming the argument.

    Models do not always keep to the schema: a limit may come as `"5"` or `5.0`, so
    a whole number written otherwise is taken, anything else refused.
    """
    query = arguments.get("query")
    limit: Any = arguments.get("limit", DEFAULT_RECALL_LIMIT)
    if limit is None:
        limit = DEFAULT_RECALL_LIMIT
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    elif isinstance(limit, str) and limit.strip().isdigit():
        limit = int(limit.strip())
    try:
        check_recall_request(query, limit)
    except ValueError as refusal:
        raise RecallRefused(str(refusal)) from refusal
    return str(query), int(limit)


def recalled(
    client: MemoryClient, tenant_id: str, contact_id: str, arguments: Mapping[str, Any]
) -> str:
    """The answer to a model's call with these arguments, as text for the model; what
    the model can act on (bad arguments, the rate limit) raises `RecallRefused` with a
    message for it. Other failures (the service unreachable, an unknown tenant) raise
    as the client's errors: they are the operator's to see, not the model's."""
    query, limit = recall_arguments(arguments)
    try:
        result = client.recall(tenant_id, contact_id, query, limit=limit)
    except InvalidRequest as refusal:
        raise RecallRefused(f"recall refused the call: {refusal.message}") from refusal
    except RateLimited as refusal:
        raise RecallRefused(
            "recall is not available right now (the conversation's rate limit); answer without it"
        ) from refusal
    return recall_text(result, query)


def answer_recall(
    client: MemoryClient,
    tenant_id: str,
    contact_id: str,
    tool_use: Mapping[str, Any],
) -> dict[str, Any]:
    """The `{"toolResult": {...}}` block answering the model's `recall_conversation` call:
    `tool_use` is the reply's `{"toolUse": {...}}` block, or its `toolUse` value.

    Its content is one text: each passage's exact words with who said it and when,
    best first. A call the model can correct (a blank query, a limit out of range)
    or that the rate limit refuses is answered with an error result the model reads.
    """
    call = tool_use.get("toolUse", tool_use)
    if call.get("name") != RECALL_TOOL_NAME:
        raise ValueError(f"not a {RECALL_TOOL_NAME} call: {call.get('name')!r}")
    arguments = call.get("input")
    try:
        text = recalled(
            client, tenant_id, contact_id, arguments if isinstance(arguments, Mapping) else {}
        )
    except RecallRefused as refusal:
        return _tool_result(str(call["toolUseId"]), str(refusal), "error")
    return _tool_result(str(call["toolUseId"]), text, "success")


def recall_text(result: RecallResult, query: str) -> str:
    """The passages as the model reads them: a line saying what they are, then each
    passage's speaker and time and its exact words, best first.

    The recall calls themselves are left out: the model's call is recorded before it
    is answered, so its own query would otherwise come back as the best match.
    """
    found = [
        (passage.turn, words)
        for passage in result.passages
        if (words := _words(passage.turn.content))
    ]
    if not found:
        return f"No earlier message of this conversation matches {query!r}."
    count = len(found)
    parts = [
        f"Found {count} earlier message{'s' if count > 1 else ''} of this conversation "
        f"matching {query!r}, best match first, word for word (a line "
        "'… N tokens omitted …' marks where a long message was cut):"
    ]
    for number, (turn, words) in enumerate(found, start=1):
        parts.append(f"[{number}] {turn.role}, {turn.sent_at}:\n{words}")
    return "\n\n".join(parts)


def _words(content: list[dict[str, Any]]) -> str:
    """A turn's blocks as text: its texts exactly; a tool call as its name and input,
    a tool result as its contents, both marked so they are not taken for speech; a
    recall call not at all."""
    said: list[str] = []
    for block in content:
        if "text" in block:
            said.append(str(block["text"]))
        elif "toolUse" in block:
            call = block["toolUse"]
            if call.get("name") == RECALL_TOOL_NAME:
                continue
            said.append(f"(called {call.get('name')} with {_json(call.get('input'))})")
        elif "toolResult" in block:
            items = block["toolResult"].get("content") or []
            answer = "\n".join(
                str(item["text"]) if "text" in item else _json(item.get("json"))
                for item in items
                if "text" in item or "json" in item
            )
            said.append(f"(tool result)\n{answer}")
    return "\n".join(said)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_result(tool_use_id: str, text: str, status: str) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": tool_use_id, "content": [{"text": text}], "status": status}}
