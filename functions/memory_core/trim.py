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
    ASCII_UNITS,
    compact_json,
    estimate_content_tokens,
    estimate_tokens,
    text_units,
    tokens_to_units,
    units_to_tokens,
)
from memory_core.turns import ContentBlock, Turn

TRIM_HEAD_TOKENS = 400
TRIM_TAIL_TOKENS = 400
TRIMMED_INPUT_KEY = "trimmedInput"
"""A cut tool input's one key: its value reads like a trimmed text (docs/decisions.md)."""


def omission_marker(omitted_tokens: int) -> str:
    return f"… {omitted_tokens} tokens omitted …"


_MARKER_UNITS = text_units(omission_marker(0)) - ASCII_UNITS
"""What a marker costs besides its count's digits (each an ASCII character)."""


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
    return trim_costed_text(text, text_units(text), shape)[0]


def trim_costed_text(text: str, units: int, shape: TrimShape) -> tuple[str, int]:
    """`trim_text` of a text that costs `units`: the text kept, and what it costs.

    The cost is added up from the kept head, the marker line and the kept tail,
    so what is cut is never read again (the window's path for the usual turn).
    """
    if units <= tokens_to_units(
        max(shape.max_message_tokens, shape.head_tokens + shape.tail_tokens)
    ):
        return text, units
    head = text[: longest_within(text, tokens_to_units(shape.head_tokens))]
    tail = text[
        len(text) - longest_within(text, tokens_to_units(shape.tail_tokens), from_end=True) :
    ]
    kept = text_units(head) + text_units(tail)
    omitted = units_to_tokens(units - kept)
    parts = [part for part in (head, omission_marker(omitted), tail) if part]
    marker = _MARKER_UNITS + ASCII_UNITS * len(str(omitted))
    return "\n".join(parts), kept + marker + ASCII_UNITS * (len(parts) - 1)


def trim_turn(turn: Turn, shape: TrimShape) -> Turn:
    """The turn trimmed, or the very same object when nothing needed trimming.

    The text the model reads (text blocks, tool calls' inputs as JSON text and
    tool results' contents, in order) is treated as one string: its longest
    head whose estimate is within `head` tokens and its longest tail within
    `tail` tokens are kept, and each block that lost characters says how many
    tokens it lost. A tool call keeps its id and name; a cut input becomes
    `{"trimmedInput": head + marker + tail}` (SPEC 5.5.8).
    """
    content = turn.content
    if len(content) == 1 and "text" in content[0]:
        # The usual turn, one text block: the same cut without the cursor's walk.
        block = content[0]
        kept, _ = trim_costed_text(block["text"], text_units(block["text"]), shape)
        return turn if kept is block["text"] else turn.with_content([{**block, "text": kept}])
    if estimate_content_tokens(content) <= shape.max_message_tokens:
        return turn
    texts = _trimmable_texts(content)
    if sum(text_units(text) for text in texts) <= tokens_to_units(
        shape.head_tokens + shape.tail_tokens
    ):
        return turn
    cursor = _Cursor(_ends(texts, shape))
    return turn.with_content([_trim_block(block, cursor) for block in turn.content])


def longest_within(text: str, units: int, *, from_end: bool = False) -> int:
    """The length of the longest head (or tail) of `text` that costs at most `units`."""
    most = min(len(text), units // ASCII_UNITS)  # no character costs less than an ASCII one

    def part(length: int) -> str:
        return text[len(text) - length :] if from_end else text[:length]

    if text_units(part(most)) <= units:
        return most
    fits, over = 0, most
    while over - fits > 1:
        middle = (fits + over) // 2
        if text_units(part(middle)) <= units:
            fits = middle
        else:
            over = middle
    return fits


def _ends(texts: Sequence[str], shape: TrimShape) -> tuple[int, int]:
    """Where the kept head ends and the kept tail starts, in the texts read as one string."""
    head = _kept(texts, tokens_to_units(shape.head_tokens), from_end=False)
    tail = _kept(texts[::-1], tokens_to_units(shape.tail_tokens), from_end=True)
    return head, sum(len(text) for text in texts) - tail


def _kept(texts: Sequence[str], units: int, *, from_end: bool) -> int:
    """How many characters from the start (or the end) of the texts cost at most `units`."""
    kept = 0
    for text in texts:
        cost = text_units(text)
        if cost > units:
            kept += longest_within(text, units, from_end=from_end)
            break
        kept += len(text)
        units -= cost
    return kept


class _Cursor:
    """Walks the blocks' texts as one string, knowing where the kept ends lie."""

    def __init__(self, ends: tuple[int, int]) -> None:
        self.offset = 0
        self.ends = ends

    def take(self, text: str) -> str:
        start = self.offset
        self.offset += len(text)
        return _cut(text, start, self.ends)


def _cut(text: str, start: int, ends: tuple[int, int]) -> str:
    """`text` occupies [start, start+len) of the string whose kept head and tail `ends` bound."""
    head_end, tail_start = ends
    end = start + len(text)
    keep_head = max(0, min(end, head_end) - start)
    keep_tail_from = max(keep_head, min(len(text), tail_start - start))
    if keep_tail_from <= keep_head:
        return text
    head, tail = text[:keep_head], text[keep_tail_from:]
    omitted = estimate_tokens(text[keep_head:keep_tail_from])
    lines = [part for part in (head, omission_marker(omitted), tail) if part]
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
