"""The history and the current message as a Bedrock Converse request fragment.

Converse wants the first message from `user`, roles that alternate and no empty
text. The window already starts on a question; here consecutive same-role
turns (an unanswered question followed by the current one, say) become one
message of several blocks, in order, and the tool blocks are repaired so that
every call is answered in the next message (`memory_core.repairs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memory_core.repairs import Repair, repair_tool_blocks
from memory_core.turns import ContentBlock

MEMORY_PREAMBLE = (
    "Summary of the earlier conversation with this contact "
    "(older turns, folded; the messages that follow continue from it):"
)
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}


@dataclass(frozen=True, slots=True)
class ConverseFragment:
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    repairs: list[Repair]

    def as_json(self) -> dict[str, Any]:
        return {"system": self.system, "messages": self.messages}


def converse_messages(
    history: Iterable[Mapping[str, Any]], current: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[Repair]]:
    """History messages then the current one: merged by role, no empty text, tools repaired."""
    return repair_tool_blocks(merged_by_role([*history, current]))


def merged_by_role(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive messages of one role as one message of their blocks, in order; no empty text."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        blocks = [dict(block) for block in message["content"] if not _is_empty_text(block)]
        if not blocks:
            continue
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": message["role"], "content": blocks})
    return merged


def converse_system(memory_summary: str | None) -> list[dict[str, Any]]:
    """The memory as system text, then a cache point so the stable prefix is cached."""
    if not memory_summary:
        return []
    return [{"text": f"{MEMORY_PREAMBLE}\n{memory_summary}"}, dict(CACHE_POINT)]


def converse_fragment(
    history: Iterable[Mapping[str, Any]], current: Mapping[str, Any], memory_summary: str | None
) -> ConverseFragment:
    messages, repairs = converse_messages(history, current)
    return ConverseFragment(converse_system(memory_summary), messages, repairs)


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
