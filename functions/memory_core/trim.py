"""Trim one history message to its head and tail, with a visible, exact marker.

Silent truncation is forbidden: a model reads a stopped sentence as a finished
one and confabulates the ending. The marker says how much is missing, so the
reader can ask for it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory_core.tokens import (
    chars_to_tokens,
    compact_json,
    estimate_content_tokens,
    tokens_to_chars,
)
from memory_core.turns import ContentBlock, Turn

TRIM_HEAD_TOKENS = 400
TRIM_TAIL_TOKENS = 400
TRIMMED_INPUT_KEY = "trimmedInput"
"""A cut tool input's one key: its value reads like a trimmed text (docs/decisions.md)."""


def omission_marker(omitted_tokens: int) -> str:
    return f"… {omitted_tokens} tokens omitted …"


@dataclass(frozen=True, slots=True)
class TrimShape:
    """When a message is trimmed, and to what."""

    max_message_tokens: int
    head_tokens: int = TRIM_HEAD_TOKENS
    tail_tokens: int = TRIM_TAIL_TOKENS

    @classmethod
    def for_budget(cls, max_message_tokens: int) -> TrimShape:
        """Head and tail are constants, capped at half the per-message budget."""
        cap = max_message_tokens // 2
        return cls(max_message_tokens, min(TRIM_HEAD_TOKENS, cap), min(TRIM_TAIL_TOKENS, cap))


def trim_text(text: str, shape: TrimShape) -> str:
    """A lone text trimmed to the shape, or the same text when it is within budget."""
    if chars_to_tokens(len(text)) <= shape.max_message_tokens:
        return text
    return _cut(text, 0, len(text), shape)


def trim_turn(turn: Turn, shape: TrimShape) -> Turn:
    """The turn trimmed, or the very same object when nothing needed trimming.

    The text the model reads (text blocks, tool calls' inputs as JSON text and
    tool results' contents, in order) is treated as one string: its first
    `head` tokens and its last `tail` tokens are kept, and each block that lost
    characters says how many tokens it lost. A tool call keeps its id and name;
    a cut input becomes `{"trimmedInput": head + marker + tail}` (SPEC 5.5.8).
    """
    content = turn.content
    if len(content) == 1 and "text" in content[0]:
        # The usual turn, one text block: the same cut without the cursor's walk.
        block = content[0]
        text = block["text"]
        if chars_to_tokens(len(text)) <= shape.max_message_tokens:
            return turn
        if len(text) <= tokens_to_chars(shape.head_tokens + shape.tail_tokens):
            return turn
        return turn.with_content([{**block, "text": _cut(text, 0, len(text), shape)}])
    if estimate_content_tokens(content) <= shape.max_message_tokens:
        return turn
    total = sum(len(text) for text in _trimmable_texts(content))
    if total <= tokens_to_chars(shape.head_tokens + shape.tail_tokens):
        return turn
    cursor = _Cursor(total, shape)
    return turn.with_content([_trim_block(block, cursor) for block in turn.content])


class _Cursor:
    """Walks the blocks' texts as one string, knowing where the kept ends lie."""

    def __init__(self, total: int, shape: TrimShape) -> None:
        self.offset = 0
        self.total = total
        self.shape = shape

    def take(self, text: str) -> str:
        start = self.offset
        self.offset += len(text)
        return _cut(text, start, self.total, self.shape)


def _cut(text: str, start: int, total: int, shape: TrimShape) -> str:
    """`text` occupies [start, start+len) of a string of `total` characters."""
    head_end = tokens_to_chars(shape.head_tokens)
    tail_start = total - tokens_to_chars(shape.tail_tokens)
    end = start + len(text)
    keep_head = max(0, min(end, head_end) - start)
    keep_tail_from = max(keep_head, min(len(text), tail_start - start))
    omitted = keep_tail_from - keep_head
    if omitted <= 0:
        return text
    head, tail = text[:keep_head], text[keep_tail_from:]
    lines = [part for part in (head, omission_marker(chars_to_tokens(omitted)), tail) if part]
    return "\n".join(lines)


def _trimmable_texts(content: Sequence[ContentBlock]) -> list[str]:
    texts: list[str] = []
    for block in content:
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            texts.append(_input_text(block))
        elif "toolResult" in block:
            texts.extend(_item_text(item) for item in _result_items(block))
    return texts


def _trim_block(block: ContentBlock, cursor: _Cursor) -> ContentBlock:
    if "text" in block:
        return {**block, "text": cursor.take(block["text"])}
    if "toolUse" in block:
        text = _input_text(block)
        kept = cursor.take(text)
        if kept == text:
            return block
        return {**block, "toolUse": {**block["toolUse"], "input": {TRIMMED_INPUT_KEY: kept}}}
    if "toolResult" in block:
        items = [_trim_item(item, cursor) for item in _result_items(block)]
        return {**block, "toolResult": {**block["toolResult"], "content": items}}
    return block


def _trim_item(item: Mapping[str, Any], cursor: _Cursor) -> Mapping[str, Any]:
    text = _item_text(item)
    kept = cursor.take(text)
    if kept == text:
        return item
    # A cut JSON document is no longer JSON: the trimmed form travels as text.
    return {"text": kept}


def _input_text(block: ContentBlock) -> str:
    return compact_json(block["toolUse"].get("input", {}))


def _result_items(block: ContentBlock) -> Sequence[Mapping[str, Any]]:
    items: Sequence[Mapping[str, Any]] = block["toolResult"].get("content", ())
    return items


def _item_text(item: Mapping[str, Any]) -> str:
    if "text" in item:
        return str(item["text"])
    if "json" in item:
        return compact_json(item["json"])
    return ""
