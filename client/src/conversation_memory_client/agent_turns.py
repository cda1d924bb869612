"""What every framework adapter shares: `Escalated`, and the blocks the service stores.

The adapters (`strands`, `langchain`, `openai_agents`) convert their
framework's messages to Bedrock Converse content blocks and back; what the
service keeps of a block is decided here, once, so a turn recorded through any
of them is stored alike. Nothing here imports a framework.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from conversation_memory_client.client import MemoryClient
from conversation_memory_client.results import ConverseResult

__all__ = [
    "USAGE_KEYS",
    "Escalated",
    "converse_blocks",
    "stored_tool_result",
    "stored_tool_use",
    "stored_usage",
]

USAGE_KEYS = (
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "cacheReadInputTokens",
    "cacheWriteInputTokens",
)
"""What the service stores of a usage report: Bedrock's counters, nothing else."""


class Escalated(Exception):
    """The service decided `escalate`: the message goes to a person, and no model ran.

    Raised out of the agent's call by every adapter. The message is recorded.
    """

    def __init__(self, result: ConverseResult) -> None:
        self.reason = result.reason or "escalate"
        self.turn_count = result.turn_count
        self.result = result
        super().__init__(f"escalated ({self.reason}) at turn {self.turn_count}")


def stored_tool_use(tool_use_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """A `toolUse` block; input that is not a JSON object is wrapped as `{"input": ...}`,
    since Converse takes an object only."""
    return {
        "toolUse": {
            "toolUseId": tool_use_id,
            "name": name,
            "input": arguments if isinstance(arguments, dict) else {"input": arguments},
        }
    }


def stored_tool_result(
    tool_use_id: str, items: Sequence[Mapping[str, Any]], status: str | None = None
) -> dict[str, Any]:
    """A `toolResult` block with the items the service stores: text and JSON; anything
    else is named in its place, so the call keeps an answer."""
    kept: list[dict[str, Any]] = []
    for item in items:
        if "text" in item:
            if str(item["text"]).strip():
                kept.append({"text": item["text"]})
        elif "json" in item:
            value = item["json"]
            kept.append(
                {"json": value} if isinstance(value, dict | list) else {"text": json.dumps(value)}
            )
        else:
            kept.append({"text": f"[{next(iter(item), 'content')} not recorded]"})
    stored: dict[str, Any] = {
        "toolUseId": tool_use_id,
        "content": kept or [{"text": "(no output)"}],
    }
    if status in ("success", "error"):
        stored["status"] = status
    return {"toolResult": stored}


def stored_usage(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    """Bedrock's usage counters as the service stores them; None without the two it needs."""
    if not usage or "inputTokens" not in usage or "outputTokens" not in usage:
        return None
    return {key: int(usage[key]) for key in USAGE_KEYS if isinstance(usage.get(key), int)}


def converse_blocks(
    client: MemoryClient,
    tenant_id: str,
    contact_id: str,
    content: list[dict[str, Any]],
    *,
    message_id: str | None = None,
) -> ConverseResult:
    """The contact's message, as the adapters hand it over: one text block goes as the
    message's `text`, anything else as its `content` blocks."""
    if len(content) == 1 and "text" in content[0]:
        return client.converse(tenant_id, contact_id, content[0]["text"], message_id=message_id)
    return client.converse(tenant_id, contact_id, content=content, message_id=message_id)
