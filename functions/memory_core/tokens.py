"""The one token estimate: cost units by script, 64 units to a token.

It is a budget signal, not billing, and it errs low: each script is weighted
so that text in it estimates at 75% to 100% of what Claude's tokenizer counts
(tests/unit/test_token_calibration.py). The window, the trim and the fold
trigger all call these functions and nothing else.

- An ASCII character costs 16 units, a quarter token: ASCII text estimates
  at ceil(characters / 4), as it always has, and needs no pass over its
  characters (`str.isascii` is a flag). English prose so estimates 15% to 30%
  over Claude's published tokenizer, and 12% under Anthropic's rate for its
  current models (3.5 characters a token); digits and JSON punctuation cost
  more in every tokenizer, but weighing them would mean a pass over every
  text (docs/decisions.md).
- Every other character costs by its Unicode block of 256 code points
  (`_BLOCK_STARTS`), the Latin-1 letters (é, ü, ß) by themselves: 32 units.
  A character beyond the Basic Multilingual Plane (an emoji) costs 128.

A text that is not ASCII is costed in a few passes that run in C: its UTF-16
encoding gives each character's block (a character beyond the BMP is a pair
of surrogates, the first costed whole and the second nothing), and its
Latin-1 encoding gives the Latin-1 letters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memory_core.turns import ContentBlock, Turn

UNITS_PER_TOKEN = 64
ASCII_UNITS = 16
"""An ASCII character: a quarter token, so ASCII text estimates at ceil(characters / 4)."""
LATIN1_UNITS = 32
"""A character of U+0080 to U+00FF: é, ü, ß, ñ, «, NBSP."""

_BLOCK_STARTS = (
    # (the first of a run of 256-code-point blocks, what each of their characters costs);
    # a run ends where the next begins. Claude's tokenizer, per character, in text.
    (0x00, ASCII_UNITS),  # ASCII; U+0080 to U+00FF are LATIN1_UNITS, counted apart
    (0x01, 160),  # Latin Extended-A and -B, IPA: Polish, Czech, Turkish (ą ř ş)
    (0x03, 72),  # Greek, and combining diacritics
    (0x04, 33),  # Cyrillic: Russian 2 characters a token, Ukrainian 1.7
    (0x05, 56),  # Armenian, Hebrew, Arabic, Syriac, Thaana
    (0x08, 64),  # Samaritan, Mandaic, Arabic Extended
    (0x09, 72),  # Devanagari and the other Indic scripts
    (0x0E, 96),  # Thai, Lao
    (0x0F, 64),  # Tibetan, Myanmar, Georgian, Hangul Jamo, Ethiopic, Khmer, ...
    (0x1E, 160),  # Latin Extended Additional: Vietnamese
    (0x1F, 72),  # Greek Extended
    (0x20, ASCII_UNITS),  # General Punctuation, currency signs: – ’ “ … € (a token or less)
    (0x21, 64),  # letterlike symbols, arrows, mathematical operators: ™ → ≤
    (0x23, 128),  # miscellaneous technical: ⌘ ⏰
    (0x24, 64),  # enclosed alphanumerics: ①
    (0x25, ASCII_UNITS),  # box drawing, geometric shapes: a run of ─ is a token or two
    (0x26, 128),  # miscellaneous symbols, dingbats: ☀ ★ ✅ ❤ (emoji)
    (0x28, 64),  # Braille, supplemental arrows, mathematical symbols
    (0x2B, 128),  # miscellaneous symbols and arrows: ⭐ ⬆
    (0x2C, 64),  # Glagolitic, Coptic, Georgian, CJK radicals, ...
    (0x30, 48),  # CJK punctuation (。、「」), Hiragana, Katakana
    (0x31, 64),  # CJK ideographs (Chinese, Japanese kanji), Bopomofo, Yi, ...
    (0xAC, 80),  # Hangul syllables (Korean)
    (0xD8, 128),  # a high surrogate: a character beyond the BMP (emoji), whole
    (0xDC, 0),  # a low surrogate: counted with its high one
    (0xE0, 64),  # private use, CJK compatibility ideographs
    (0xFB, 56),  # presentation forms: Hebrew, Arabic
    (0xFE, 64),  # variation selectors (the emoji one), CJK forms, fullwidth forms (，)
)


def _block_units() -> list[int]:
    """What a character costs, by its block: `(code point >> 8)`, the surrogates' included."""
    units: list[int] = []
    ends = [start for start, _ in _BLOCK_STARTS[1:]]
    for (start, cost), end in zip(_BLOCK_STARTS, [*ends, 256], strict=True):
        units.extend([cost] * (end - start))
    return units


_COSTS = sorted(set(_block_units()))
"""Each cost a block can have, once: a block's class is its cost's index here."""
_CLASS_OF_BLOCK = bytes(_COSTS.index(cost) for cost in _block_units())
_ASCII_BYTES = bytes(range(0x80))


def text_units(text: str) -> int:
    """The cost of a text, in units (`UNITS_PER_TOKEN` to a token)."""
    if text.isascii():
        return len(text) * ASCII_UNITS
    # One byte per UTF-16 code unit: the high byte, the block of the character it encodes.
    blocks = text.encode("utf-16-be", "surrogatepass")[::2].translate(_CLASS_OF_BLOCK)
    units = sum(cost * blocks.count(index) for index, cost in enumerate(_COSTS))
    # Block 0 costs as ASCII; its upper half, Latin-1's letters, costs more.
    latin1 = text.encode("latin-1", "ignore").translate(None, _ASCII_BYTES)
    return units + len(latin1) * (LATIN1_UNITS - ASCII_UNITS)


def units_to_tokens(units: int) -> int:
    return -(-units // UNITS_PER_TOKEN)


def tokens_to_units(tokens: int) -> int:
    return tokens * UNITS_PER_TOKEN


def estimate_tokens(text: str) -> int:
    return units_to_tokens(text_units(text))


def estimate_turn_tokens(turn: Turn) -> int:
    return estimate_content_tokens(turn.content)


def estimate_content_tokens(content: Sequence[ContentBlock]) -> int:
    return units_to_tokens(content_units(content))


def content_units(content: Sequence[ContentBlock]) -> int:
    """The cost of a message's blocks, taken together: a message's estimate rounds once."""
    units = 0
    for block in content:
        # The common block, a text, inline; every other kind through `block_units`.
        if "text" in block:
            units += text_units(block["text"])
        else:
            units += block_units(block)
    return units


def block_units(block: ContentBlock) -> int:
    """The cost of a block: a tool block's is its JSON text's, as Converse carries it.

    The id, the name and the keys are read by the model too, so a tool block
    is counted whole (SPEC 5.5.8), the same way in the window, the trim and
    the fold trigger. Images and documents carry no text and count nothing.
    """
    if "text" in block:
        return text_units(block["text"])
    if "toolUse" in block or "toolResult" in block:
        return text_units(compact_json(block))
    return 0


# ASCII conversions, for bench/prompt_cost.py's synthetic (ASCII) prompts. The estimate
# itself counts units, never characters.


def chars_to_tokens(chars: int) -> int:
    """The estimate of `chars` ASCII characters."""
    return units_to_tokens(chars * ASCII_UNITS)


def tokens_to_chars(tokens: int) -> int:
    """How many ASCII characters make `tokens`."""
    return tokens_to_units(tokens) // ASCII_UNITS


def block_chars(block: ContentBlock) -> int:
    """The characters of a block's text (a tool block's JSON): its cost were they ASCII."""
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
