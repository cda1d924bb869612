"""The history and the current message as a Bedrock Converse request fragment.

Converse wants the first message from `user`, roles that alternate and no empty
text. The window already starts on a question; here consecutive same-role
turns (an unanswered question followed by the current one, say) become one
message of several blocks, in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_core.turns import ContentBlock, Turn

MEMORY_PREAMBLE = (
    "Summary of the earlier conversation with this contact "
    "(older turns, folded; the messages that follow continue from it):"
)
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}


def converse_messages(history: Iterable[Turn], current: Turn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in (*history, current):
        blocks = [dict(block) for block in turn.content if not _is_empty_text(block)]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == turn.role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": turn.role, "content": blocks})
    return messages


def converse_system(memory_summary: str | None) -> list[dict[str, Any]]:
    """The memory as system text, then a cache point so the stable prefix is cached."""
    if not memory_summary:
        return []
    return [{"text": f"{MEMORY_PREAMBLE}\n{memory_summary}"}, dict(CACHE_POINT)]


def converse_fragment(
    history: Iterable[Turn], current: Turn, memory_summary: str | None
) -> dict[str, Any]:
    return {
        "system": converse_system(memory_summary),
        "messages": converse_messages(history, current),
    }


def _is_empty_text(block: ContentBlock) -> bool:
    return "text" in block and not block["text"].strip()


# Step Functions' AWS SDK integrations name every member as the API reference
# does (`Messages`, `Role`, `Content`, `Text`); tool inputs and JSON results are
# the caller's own documents and keep their keys.
_OPAQUE_MEMBERS = {"input", "json"}


def sdk_member_names(value: Any) -> Any:
    """A Converse fragment with its member names as Step Functions' SDK integration wants."""
    if isinstance(value, list):
        return [sdk_member_names(item) for item in value]
    if isinstance(value, dict):
        return {
            key[:1].upper() + key[1:]: item if key in _OPAQUE_MEMBERS else sdk_member_names(item)
            for key, item in value.items()
        }
    return value
