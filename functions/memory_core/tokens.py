"""The one token estimate: ceil(characters / 4), over Unicode code points.

It is a budget signal, not billing. It undercounts rather than over for
typical English text, which is the safe direction for a budget. The window,
the trim and the fold trigger all call these functions and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memory_core.turns import ContentBlock, Turn

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    return chars_to_tokens(len(text))


def chars_to_tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def tokens_to_chars(tokens: int) -> int:
    return tokens * CHARS_PER_TOKEN


def estimate_turn_tokens(turn: Turn) -> int:
    return estimate_content_tokens(turn.content)


def estimate_content_tokens(content: Sequence[ContentBlock]) -> int:
    return -(-block_chars_of(content) // CHARS_PER_TOKEN)


def block_chars_of(content: Sequence[ContentBlock]) -> int:
    chars = 0
    for block in content:
        # The common block, a text, inline; every other kind through `block_chars`.
        if "text" in block:
            chars += len(block["text"])
        else:
            chars += block_chars(block)
    return chars


def block_chars(block: ContentBlock) -> int:
    """The characters a block costs: a tool block its JSON text, as Converse carries it.

    The id, the name and the keys are read by the model too, so a tool block
    is counted whole (SPEC 5.5.8), the same way in the window, the trim and
    the fold trigger. Images and documents carry no text and count nothing.
    """
    if "text" in block:
        return len(block["text"])
    if "toolUse" in block or "toolResult" in block:
        return len(compact_json(block))
    return 0


def readable_texts(content: Sequence[ContentBlock]) -> Iterator[str]:
    """Every piece of text the model reads from these blocks, in order.

    Tool calls and tool results count: a tool that returns a long document costs
    prompt tokens like a pasted one. Images and documents carry no text and
    count nothing.
    """
    for block in content:
        if "text" in block:
            yield block["text"]
        elif "toolUse" in block:
            tool_use = block["toolUse"]
            yield tool_use.get("name", "")
            yield compact_json(tool_use.get("input", {}))
        elif "toolResult" in block:
            for item in block["toolResult"].get("content", ()):
                yield from _tool_result_texts(item)


def _tool_result_texts(item: Mapping[str, Any]) -> Iterator[str]:
    if "text" in item:
        yield item["text"]
    elif "json" in item:
        yield compact_json(item["json"])


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
