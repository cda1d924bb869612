"""Trim one history message to its head and tail, with a visible, exact marker.

Silent truncation is forbidden: a model reads a stopped sentence as a finished
one and confabulates the ending. The marker says how much is missing, so the
reader can ask for it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from memory_core.tokens import (
    CHEAPEST_UNITS,
    DIGIT_UNITS,
    USUAL_UNITS,
    compact_json,
    content_units,
    estimate_content_tokens,
    estimate_tokens,
    text_units,
    tokens_to_units,
    units_to_tokens,
)
from memory_core.turns import ContentBlock, TextCut, Turn

TRIM_HEAD_TOKENS = 400
TRIM_TAIL_TOKENS = 400
TRIMMED_INPUT_KEY = "trimmedInput"
"""A cut tool input's one key: its value reads like a trimmed text (docs/decisions.md)."""


def omission_marker(omitted_tokens: int) -> str:
    return f"… {omitted_tokens} tokens omitted …"


_LINE_BREAK_UNITS = text_units("\n")
"""The marker is a line of its own between the head and the tail."""
_MARKER_UNITS = text_units(omission_marker(0)) - DIGIT_UNITS
"""What a marker costs besides its count's digits."""


@dataclass(frozen=True, slots=True)
class TrimShape:
    """When a message is trimmed, and to what."""

    max_message_tokens: int
    head_tokens: int = TRIM_HEAD_TOKENS
    tail_tokens: int = TRIM_TAIL_TOKENS

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.max_message_tokens, self.head_tokens, self.tail_tokens)

    @classmethod
    def for_budget(cls, max_message_tokens: int) -> TrimShape:
        """Head and tail are constants, capped at half the per-message budget."""
        cap = max_message_tokens // 2
        return cls(max_message_tokens, min(TRIM_HEAD_TOKENS, cap), min(TRIM_TAIL_TOKENS, cap))


def trim_text(text: str, shape: TrimShape) -> str:
    """A lone text trimmed to the shape, or the same text when it is within budget."""
    return trim_costed_text(text, text_units(text), shape)[0]


def trim_costed_text(
    text: str, units: int, shape: TrimShape, cut: TextCut | None = None
) -> tuple[str, int]:
    """`trim_text` of a text that costs `units`: the text kept, and what it costs.

    `cut`, the text's own made as it was recorded, is used when it was made for
    this shape; otherwise the text is cut here. Either way the cost is added up
    from the kept head, the marker line and the kept tail, so what is cut is
    never read again (the window's path for the usual turn).
    """
    if cut is None or cut.shape != shape.key:
        cut = text_cut(text, units, shape)
    if cut is None:
        return text, units
    parts = [text[: cut.head], omission_marker(cut.omitted), text[len(text) - cut.tail :]]
    return "\n".join(part for part in parts if part), cut.units


def text_cut(text: str, units: int, shape: TrimShape) -> TextCut | None:
    """Where the shape cuts a text that costs `units`; None for a text it leaves whole."""
    if units <= tokens_to_units(
        max(shape.max_message_tokens, shape.head_tokens + shape.tail_tokens)
    ):
        return None
    head, head_units = _within(
        text, tokens_to_units(shape.head_tokens), from_end=False, whole=units
    )
    tail, tail_units = _within(text, tokens_to_units(shape.tail_tokens), from_end=True, whole=units)
    kept = head_units + tail_units
    omitted = units_to_tokens(units - kept)
    marker = _MARKER_UNITS + DIGIT_UNITS * len(str(omitted))
    line_breaks = _LINE_BREAK_UNITS * (bool(head) + bool(tail))
    return TextCut(shape.key, head, tail, omitted, kept + marker + line_breaks)


def prepared(turn: Turn, shape: TrimShape) -> Turn:
    """The turn as it is recorded: with its estimate, and a long text turn with its cut."""
    units = content_units(turn.content)
    match turn.content:
        case [{"text": str(text)}]:
            cut = text_cut(text, units, shape)
        case _:
            cut = None  # several blocks, or a tool block: cut when read (`trim_turn`)
    return replace(turn, cost_units=units, text_cut=cut)


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
    texts = trimmable_texts(content)
    if sum(text_units(text) for text in texts) <= tokens_to_units(
        shape.head_tokens + shape.tail_tokens
    ):
        return turn
    cursor = _Cursor(_ends(texts, shape))
    return turn.with_content(recut(turn.content, cursor))


def longest_within(
    text: str, units: int, *, from_end: bool = False, text_units_known: int | None = None
) -> int:
    """The length of the longest head (or tail) of `text` that costs at most `units`."""
    return _within(text, units, from_end=from_end, whole=text_units_known)[0]


def _within(text: str, units: int, *, from_end: bool, whole: int | None) -> tuple[int, int]:
    """`longest_within`, and what that head (or tail) costs.

    A cost is the sum of its characters', so the search walks in from the end it
    keeps, costing only the stretch it adds: each stretch a little shorter than
    what is left of `units` buys at the text's average cost a character (`whole`,
    the text's cost, when the caller has it), and shorter again where that is
    too much. A 400-token head of a 50,000-character text so costs one stretch of
    about its own length and a few short ones, not the text.
    """
    size = len(text)
    average = max(CHEAPEST_UNITS, (whole or USUAL_UNITS * size) // size) if size else 1
    length = spent = 0
    step = min(size, max(1, units * 15 // 16 // average))
    while step:
        stretch = (
            text[size - length - step : size - length] if from_end else text[length : length + step]
        )
        cost = text_units(stretch)
        if spent + cost <= units:
            length, spent = length + step, spent + cost
            step = min(size - length, max(1, (units - spent) * 15 // 16 // average))
        elif step == 1:
            break  # the next character alone is over: nothing longer fits
        else:
            step = max(1, step * (units - spent) // cost)  # less than `step`: cost > what is left
    return length, spent


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
            kept += longest_within(text, units, from_end=from_end, text_units_known=cost)
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


class Cutter(Protocol):
    """Gives each of a turn's texts, taken in `trimmable_texts` order, what is kept of it."""

    def take(self, text: str) -> str: ...


def recut(content: Sequence[ContentBlock], cutter: Cutter) -> list[ContentBlock]:
    """The blocks with each text replaced by what `cutter` keeps of it.

    A tool call keeps its id and name, a cut input becoming `{"trimmedInput": ...}`;
    a cut tool-result item becomes text.
    """
    return [_trim_block(block, cutter) for block in content]


def trimmable_texts(content: Sequence[ContentBlock]) -> list[str]:
    """The text the model reads in `content`, in order: text blocks, tool calls' inputs as
    compact JSON and tool results' contents."""
    texts: list[str] = []
    for block in content:
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            texts.append(_input_text(block))
        elif "toolResult" in block:
            texts.extend(_item_text(item) for item in _result_items(block))
    return texts


def _trim_block(block: ContentBlock, cursor: Cutter) -> ContentBlock:
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


def _trim_item(item: Mapping[str, Any], cursor: Cutter) -> Mapping[str, Any]:
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
