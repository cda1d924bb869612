"""The history and the current message as a Bedrock Converse request fragment.

Converse wants the first message from `user`, roles that alternate and no empty
text. The window already starts on a question; here consecutive same-role
turns (an unanswered question followed by the current one, say) become one
message of several blocks, in order, and the tool blocks are repaired so that
every call is answered in the next message (`memory_core.repairs`).

Cache points (SPEC 5, prompt caching) mark the prefixes worth caching: one
after the memory in `system`, one after the history, before the current
message's first block, and, for the cache-stable window, one where the
previous call's history ended, so that a model which reads the cache only at
a cache point (no lookback) finds the previous call's prefix there. None
marks an empty prefix (no memory, no history), none at all for a tenant whose
`promptCache` is `off`, and one TTL for all, so the TTLs never increase from
`system` to `messages`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.repairs import Repair, repair_tool_blocks
from memory_core.rules.model import PromptCache, PromptCacheTtl
from memory_core.turns import ContentBlock

MEMORY_PREAMBLE = (
    "Summary of the earlier conversation with this contact "
    "(older turns, folded; the messages that follow continue from it):"
)
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
"""A cache point of Bedrock's default TTL, 5 minutes: written without `ttl`, as SDKs
that predate the member still take it."""


@dataclass(frozen=True, slots=True)
class CachePoints:
    """Whether the fragment carries cache points, and the TTL they ask for."""

    placed: bool = True
    ttl: PromptCacheTtl = "5m"

    @classmethod
    def of(cls, prompt_cache: PromptCache, ttl: PromptCacheTtl) -> CachePoints:
        """A tenant's cache points, from its `promptCache` and `promptCacheTtl` rules."""
        if prompt_cache == "off":
            # Models without prompt caching refuse a request with any cache point.
            return cls(placed=False)
        # `stable` marks the same two prefixes as `sliding`, and the caller adds the
        # previous call's (`converse_fragment`'s `previous_history`).
        return cls(placed=True, ttl=ttl)

    def block(self) -> dict[str, Any]:
        if self.ttl == "5m":
            return {"cachePoint": {"type": "default"}}
        return {"cachePoint": {"type": "default", "ttl": self.ttl}}


NO_CACHE_POINTS = CachePoints(placed=False)


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


def converse_system(memory_summary: str | None, cache: CachePoints) -> list[dict[str, Any]]:
    """The memory as system text, then (unless caching is off) a cache point after it."""
    if not memory_summary:
        return []
    memory = {"text": f"{MEMORY_PREAMBLE}\n{memory_summary}"}
    return [memory, cache.block()] if cache.placed else [memory]


def converse_fragment(
    history: Sequence[Mapping[str, Any]],
    current: Mapping[str, Any],
    memory_summary: str | None,
    cache: CachePoints,
    *,
    previous_history: int | None = None,
) -> ConverseFragment:
    """The fragment; `previous_history`, where known, is how many of the history's
    messages the previous call's history held: a cache point goes where that
    call put its last one, before its own message."""
    merged = merged_by_role([*history, current])
    own = _blocks_of_the_current(merged, current)
    previous_own = _first_block_of(merged, history, previous_history)
    messages, repairs = repair_tool_blocks(merged)
    if cache.placed:
        messages = _cache_point_after_the_history(messages, own, cache.block())
        if previous_own is not None:
            messages = _cache_point_before(messages, previous_own, cache.block())
    return ConverseFragment(converse_system(memory_summary, cache), messages, repairs)


def _blocks_of_the_current(
    merged: Sequence[Mapping[str, Any]], current: Mapping[str, Any]
) -> set[int]:
    """The identities of the current message's blocks in `merged`: its last message's last ones.

    `merged_by_role` copies every block once and the repairs move blocks without
    copying them, so identity tells the current message's blocks from the
    history's (and from the repairs' synthetic results) after both.
    """
    count = sum(1 for block in current["content"] if not _is_empty_text(block))
    if not merged or not count:
        return set()
    return {id(block) for block in merged[-1]["content"][-count:]}


def _first_block_of(
    merged: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    index: int | None,
) -> int | None:
    """The identity, in `merged`, of the first block of the history's message `index`.

    `merged_by_role` keeps every non-empty block once, in order: the n-th of them
    in the history is the n-th in `merged`.
    """
    if not index or index >= len(history):
        return None
    if all(_is_empty_text(block) for block in history[index]["content"]):
        return None
    before = sum(
        1
        for message in history[:index]
        for block in message["content"]
        if not _is_empty_text(block)
    )
    for message in merged:
        content = message["content"]
        if before < len(content):
            return id(content[before])
        before -= len(content)
    return None


def _cache_point_before(
    messages: list[dict[str, Any]], anchor: int, point: dict[str, Any]
) -> list[dict[str, Any]]:
    """`messages` with a cache point just before the block `anchor`, placed as the
    previous call placed its point before its own message (see below)."""
    for position, message in enumerate(messages):
        content = message["content"]
        at = next((i for i, block in enumerate(content) if id(block) == anchor), None)
        if at is None:
            continue
        if at > 0 and "toolResult" not in content[at]:
            if "cachePoint" in content[at - 1]:
                return messages
            marked = {**message, "content": [*content[:at], point, *content[at:]]}
            return [*messages[:position], marked, *messages[position + 1 :]]
        # The anchor opens its message, or is a tool result, which no point may precede
        # within it (a parallel call's second result, merged after the first): the
        # previous call's point ended the message before.
        if position == 0 or "cachePoint" in messages[position - 1]["content"][-1]:
            return messages  # no place, or the point after the history stands there
        before = messages[position - 1]
        marked = {**before, "content": [*before["content"], point]}
        return [*messages[: position - 1], marked, *messages[position:]]
    return messages


def _cache_point_after_the_history(
    messages: list[dict[str, Any]], own: set[int], point: dict[str, Any]
) -> list[dict[str, Any]]:
    """`messages` with a cache point after the history, before the current message's blocks.

    Where the current message stands alone, that is the end of the message
    before it. Where it is merged into the history's last message (both from the
    contact), the point goes between the history's blocks and its own, unless a
    tool result would follow the point: tool results come first in their message,
    so the point then goes at the end of the message before. No history, no point.
    """
    if not messages:
        return messages
    last = messages[-1]
    content = last["content"]
    first_own = next((i for i, block in enumerate(content) if id(block) in own), None)
    if first_own is None:
        return messages  # nothing of the current message reached the fragment
    if first_own > 0 and "toolResult" not in content[first_own]:
        marked = {**last, "content": [*content[:first_own], point, *content[first_own:]]}
        return [*messages[:-1], marked]
    if len(messages) < 2:
        return messages
    before = messages[-2]
    return [*messages[:-2], {**before, "content": [*before["content"], point]}, last]


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
