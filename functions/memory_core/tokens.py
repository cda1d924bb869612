"""The one token estimate: cost units by kind of character, 64 units to a token.

It is a budget signal, not billing, and it errs low: each kind of character is
weighted so that natural text in any script estimates at 75% to 100% of what
Claude's tokenizer counts (tests/unit/test_token_calibration.py). The window,
the trim and the fold trigger all call these functions and nothing else.

- An ASCII character costs by what it is (`_LOW_CLASSES`): a letter 13 units,
  for an English word of about five letters is one token; a space 1, for it
  joins the word after it; a digit 32, two digits a token; JSON's quotes,
  brackets, colons and commas 16; any other punctuation mark 64, a token of
  its own.
- A Latin-1 letter (é, ü, ß, ñ) costs 153 units: it stands for the word it is
  in, since the tokenizer splits French, German or Spanish words into pieces
  where an English word of the same length is one token, and the accent is the
  one sign of such a word a character carries. The Latin-1 symbols (NBSP, «, °)
  cost 32.
- Every other character costs by its Unicode block of 256 code points
  (`_BLOCK_STARTS`). A character beyond the Basic Multilingual Plane (an emoji)
  costs 133.

Every cost is additive, so a text's head costs no more than the whole text and
a trim can search for the longest head within a budget. A text is costed in a
few passes that run in C: its Latin-1 encoding (ASCII text's own bytes) gives
each of its first 256 code points' kind, and its UTF-16 encoding gives every
other character's block (a character beyond the BMP is a pair of surrogates,
the first costed whole and the second nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memory_core.turns import ContentBlock, Turn

UNITS_PER_TOKEN = 64

LETTER_UNITS = 13
"""An ASCII letter: English runs about five letters a token."""
SPACE_UNITS = 1
DIGIT_UNITS = 32
JSON_PUNCTUATION_UNITS = 16
"""`"{}[]:,`: compact JSON's `":"` or `","` is one token."""
PUNCTUATION_UNITS = 64
"""Any other ASCII punctuation mark or symbol: a token of its own."""
CONTROL_UNITS = 16
"""A newline, a tab, any other control character."""
LATIN1_LETTER_UNITS = 153
"""À to ÿ but × and ÷: the word an accented letter is in costs more than an English one."""
LATIN1_SYMBOL_UNITS = 32
"""U+0080 to U+00BF, × and ÷: NBSP, «, », °, £, ©."""
CHEAPEST_UNITS = SPACE_UNITS
"""No character costs less: a head of `n` units has at most `n` characters."""
USUAL_UNITS = 16
"""About what a character of prose costs, spaces and punctuation included: where a
search for the longest head within a cost starts."""


def _low_costs() -> list[int]:
    """What each of the first 256 code points costs."""
    costs: list[int] = []
    for code in range(256):
        char = chr(code)
        if code >= 0x80:
            letter = code >= 0xC0 and char not in "×÷"
            costs.append(LATIN1_LETTER_UNITS if letter else LATIN1_SYMBOL_UNITS)
        elif char.isalpha():
            costs.append(LETTER_UNITS)
        elif char.isdigit():
            costs.append(DIGIT_UNITS)
        elif char == " ":
            costs.append(SPACE_UNITS)
        elif char in '"{}[]:,':
            costs.append(JSON_PUNCTUATION_UNITS)
        elif char.isprintable():
            costs.append(PUNCTUATION_UNITS)
        else:
            costs.append(CONTROL_UNITS)
    return costs


# Each cost of the first 256 code points but a letter's is a class, numbered in
# `_LOW_CLASS_COSTS`'s order: a text's bytes, letters dropped, are translated to their
# classes and counted class by class, in C.
_LOW_COSTS = _low_costs()
_LOW_CLASS_COSTS = sorted(set(_LOW_COSTS) - {LETTER_UNITS})
_CLASS_OF_LOW = bytes(
    _LOW_CLASS_COSTS.index(cost) if cost != LETTER_UNITS else 0 for cost in _LOW_COSTS
)
_LETTERS = bytes(code for code, cost in enumerate(_LOW_COSTS) if cost == LETTER_UNITS)
_LOW_CLASSES = tuple(enumerate(_LOW_CLASS_COSTS))

_BLOCK_STARTS = (
    # (the first of a run of 256-code-point blocks, what each of their characters costs);
    # a run ends where the next begins. Claude's tokenizer, per character, in text.
    (0x00, 0),  # ASCII and Latin-1: costed by `_low_costs`
    (0x01, 200),  # Latin Extended-A and -B, IPA: Polish, Czech, Turkish (ą ř ş)
    (0x03, 68),  # Greek, and combining diacritics
    (0x04, 34),  # Cyrillic: Russian 2 characters a token, Ukrainian 1.7
    (0x05, 55),  # Armenian, Hebrew, Arabic, Syriac, Thaana
    (0x08, 64),  # Samaritan, Mandaic, Arabic Extended
    (0x09, 76),  # Devanagari and the other Indic scripts
    (0x0E, 101),  # Thai, Lao
    (0x0F, 64),  # Tibetan, Myanmar, Georgian, Hangul Jamo, Ethiopic, Khmer, ...
    (0x1E, 100),  # Latin Extended Additional: Vietnamese
    (0x1F, 72),  # Greek Extended
    (0x20, 15),  # General Punctuation, currency signs: – ’ “ … € (a token or less)
    (0x21, 64),  # letterlike symbols, arrows, mathematical operators: ™ → ≤
    (0x23, 122),  # miscellaneous technical: ⌘ ⏰
    (0x24, 64),  # enclosed alphanumerics: ①
    (0x25, 16),  # box drawing, geometric shapes: a run of ─ is a token or two
    (0x26, 122),  # miscellaneous symbols, dingbats: ☀ ★ ✅ ❤ (emoji)
    (0x28, 64),  # Braille, supplemental arrows, mathematical symbols
    (0x2B, 134),  # miscellaneous symbols and arrows: ⭐ ⬆
    (0x2C, 64),  # Glagolitic, Coptic, Georgian, CJK radicals, ...
    (0x30, 50),  # CJK punctuation (。、「」), Hiragana, Katakana
    (0x31, 65),  # CJK ideographs (Chinese, Japanese kanji), Bopomofo, Yi, ...
    (0xAC, 76),  # Hangul syllables (Korean)
    (0xD8, 133),  # a high surrogate: a character beyond the BMP (emoji), whole
    (0xDC, 0),  # a low surrogate: counted with its high one
    (0xE0, 64),  # private use, CJK compatibility ideographs
    (0xFB, 56),  # presentation forms: Hebrew, Arabic
    (0xFE, 62),  # variation selectors (the emoji one), CJK forms, fullwidth forms (，)
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
_BLOCK_CLASSES = tuple((index, cost) for index, cost in enumerate(_COSTS) if cost)


def text_units(text: str) -> int:
    """The cost of a text, in units (`UNITS_PER_TOKEN` to a token)."""
    if text.isascii():
        return _low_units(text.encode("ascii"))
    # One byte per UTF-16 code unit: the high byte, the block of the character it encodes.
    blocks = text.encode("utf-16-be", "surrogatepass")[::2].translate(_CLASS_OF_BLOCK)
    units = sum(cost * blocks.count(index) for index, cost in _BLOCK_CLASSES)
    return units + _low_units(text.encode("latin-1", "ignore"))


def _low_units(low: bytes) -> int:
    """The cost of characters of the first 256 code points, one byte each.

    Letters, the commonest, are dropped in the first pass; what is left, about a
    fifth of prose, is classed and counted class by class.
    """
    rest = low.translate(None, _LETTERS)
    classed = rest.translate(_CLASS_OF_LOW)
    units = LETTER_UNITS * (len(low) - len(rest))
    for index, cost in _LOW_CLASSES:
        units += cost * classed.count(index)
    return units


def units_to_tokens(units: int) -> int:
    return -(-units // UNITS_PER_TOKEN)


def tokens_to_units(tokens: int) -> int:
    return tokens * UNITS_PER_TOKEN


def estimate_tokens(text: str) -> int:
    return units_to_tokens(text_units(text))


def estimate_turn_tokens(turn: Turn) -> int:
    if turn.cost_units is not None:
        return units_to_tokens(turn.cost_units)
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
