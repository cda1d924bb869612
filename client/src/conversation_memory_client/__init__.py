"""A Python client of the conversation-memory service, over its HTTP API or its Lambda.

from conversation_memory_client import MemoryClient

memory = MemoryClient.over_http("https://abc123.execute-api.eu-west-1.amazonaws.com/prod/")
result = memory.converse("acme-legal", "c-42", "Is clause 7 still in force?")
if not result.escalated:
    reply = bedrock.converse(modelId=MODEL_ID, **result.converse)
    memory.record("acme-legal", "c-42", role="assistant",
                  content=reply["output"]["message"]["content"], usage=reply["usage"])
"""

from __future__ import annotations

from conversation_memory_client.agent_turns import Escalated
from conversation_memory_client.client import MemoryClient
from conversation_memory_client.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    MemoryServiceError,
    MessageTooLarge,
    NotConfigured,
    NotFound,
    RateLimited,
    SentInFuture,
    ServiceUnavailable,
    UnknownTenant,
    UnsupportedMediaType,
)
from conversation_memory_client.recall_tool import (
    RECALL_TOOL_NAME,
    answer_recall,
    recall_tool_spec,
)
from conversation_memory_client.results import (
    ContactSummary,
    ConverseResult,
    Erasure,
    ExportedTurn,
    Memory,
    MemoryView,
    RecalledPassage,
    RecalledTurn,
    RecallResult,
    RecordedTurn,
    Window,
    WindowPreview,
)

__all__ = [
    "RECALL_TOOL_NAME",
    "Conflict",
    "ContactSummary",
    "ConverseResult",
    "Erasure",
    "Escalated",
    "ExportedTurn",
    "Forbidden",
    "InvalidRequest",
    "Memory",
    "MemoryClient",
    "MemoryServiceError",
    "MemoryView",
    "MessageTooLarge",
    "NotConfigured",
    "NotFound",
    "RateLimited",
    "RecallResult",
    "RecalledPassage",
    "RecalledTurn",
    "RecordedTurn",
    "SentInFuture",
    "ServiceUnavailable",
    "UnknownTenant",
    "UnsupportedMediaType",
    "Window",
    "WindowPreview",
    "answer_recall",
    "recall_tool_spec",
]
