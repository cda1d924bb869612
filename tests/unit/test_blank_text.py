"""Blank text is refused wherever text is taken: nothing in it a reader would see.

Bedrock Converse refuses a blank text block; a text of zero-width or control
characters is blank to a reader as much as one of spaces. A text holding at
least one visible character is taken whatever else it holds: an emoji ZWJ
sequence carries U+200D, Persian carries U+200C, and both are text.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from converse_history.api_models import (
    ConverseRequest,
    RecordTurnRequest,
    is_blank,
    is_blank_character,
    not_blank_pattern,
)

BLANK = [
    pytest.param("\u200b", id="zero width space"),
    pytest.param("\u0000", id="NUL"),
    pytest.param("\u200c", id="zero width non-joiner"),
    pytest.param("\u200d", id="zero width joiner"),
    pytest.param("\u2060", id="word joiner"),
    pytest.param("\ufeff", id="byte order mark"),
    pytest.param(" \t\n\r\u200b\u2060 \u200c", id="white space and zero widths"),
    pytest.param("\u00a0\u3000\u2007\u202f", id="no-break and wide spaces"),
    pytest.param("\u2028\u2029\u0085", id="line and paragraph separators"),
    pytest.param("\u0007\u001b\u007f\u009f", id="controls C0 C1 DEL"),
    pytest.param("\u00ad", id="soft hyphen"),
    pytest.param("\u200e\u200f\u202e\u2066\u2069", id="bidi marks and isolates"),
    pytest.param("\u180e", id="mongolian vowel separator"),
    pytest.param("\u2061\u2062\u2063\u2064", id="invisible operators"),
    pytest.param("\ufe0f\ufe0e", id="variation selectors alone"),
    pytest.param("\U000e0100", id="supplementary variation selector"),
    pytest.param("\u034f", id="combining grapheme joiner"),
    pytest.param("\u3164\u115f\u1160\uffa0", id="hangul fillers"),
    pytest.param("\u2800", id="braille pattern blank"),
    pytest.param("\U000e0001\U000e0041\U000e007f", id="tag characters"),
    pytest.param("\ufff9\ufffb", id="interlinear annotation anchors"),
]

VISIBLE = [
    pytest.param("a", id="one letter"),
    pytest.param(".", id="one full stop"),
    pytest.param("\U0001f469\u200d\U0001f4bb", id="emoji ZWJ sequence"),
    pytest.param("\u2764\ufe0f", id="emoji with its variation selector"),
    pytest.param(
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", id="tag flag"
    ),
    pytest.param("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", id="persian with ZWNJ"),
    pytest.param("\u200ba", id="zero width then a letter"),
    pytest.param("a\u200b", id="a letter then zero width"),
    pytest.param("   \u200b\u3000x\n\n", id="one letter among blanks"),
    pytest.param("\u06dd", id="end of ayah, a format character that draws"),
    pytest.param("\u0600", id="arabic number sign"),
    pytest.param("\u0301", id="a combining accent alone"),
    pytest.param("\ufffd", id="the replacement character"),
    pytest.param("\ue000", id="private use"),
    pytest.param("\u3000\u3042", id="hiragana after a wide space"),
]


def refusal(model: Any, body: dict[str, Any]) -> tuple[str, str]:
    """The first error's field, as the API names it, and its message."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate(body)
    first = refused.value.errors()[0]
    return ".".join(map(str, first["loc"])), first["msg"].removeprefix("Value error, ")


def every_text_field(text: str) -> list[tuple[Any, dict[str, Any], str]]:
    """Every place a body takes text, with `text` there, and the field that names it."""
    result = {"toolResult": {"toolUseId": "t1", "content": [{"text": text}]}}
    in_result = "ToolResultBlock.toolResult.content.0.ToolResultText.text"
    return [
        (ConverseRequest, {"message": {"text": text}}, "message.text"),
        (
            ConverseRequest,
            {"message": {"content": [{"text": text}]}},
            "message.content.0.TextBlock.text",
        ),
        (
            ConverseRequest,
            {"message": {"content": [result, {"text": "and?"}]}},
            f"message.content.0.{in_result}",
        ),
        (RecordTurnRequest, {"role": "assistant", "text": text}, "text"),
        (
            RecordTurnRequest,
            {"role": "assistant", "content": [{"text": "ok"}, {"text": text}]},
            "content.1.TextBlock.text",
        ),
        (RecordTurnRequest, {"role": "user", "content": [result]}, f"content.0.{in_result}"),
    ]


@pytest.mark.parametrize("text", BLANK)
def test_blank_text_is_refused_in_every_field_naming_it(text):
    for model, body, field in every_text_field(text):
        named, message = refusal(model, body)
        assert named == field, (body, named)
        assert message.startswith("must not be blank: it holds only white space and invisible")


@pytest.mark.parametrize("text", VISIBLE)
def test_text_with_something_visible_is_taken_as_sent(text):
    for model, body, _ in every_text_field(text):
        assert model.model_validate(body).model_dump(by_alias=True, exclude_none=True) == body


def test_empty_text_is_refused_as_empty():
    for model, body, field in every_text_field(""):
        assert refusal(model, body) == (field, "must not be empty")


def test_the_refusal_names_the_characters_found():
    _, message = refusal(ConverseRequest, {"message": {"text": "\u200b\u0000\u200b\u2060"}})
    assert message.endswith("(U+200B, U+0000, U+2060)")
    _, message = refusal(ConverseRequest, {"message": {"text": " \t\n\r\u200b\u2060"}})
    assert message.endswith("(U+0020, U+0009, U+000A, U+000D, ...)")


def test_every_white_space_character_python_knows_is_blank():
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert spaces
    assert all(is_blank_character(c) for c in spaces)


@pytest.mark.parametrize("category", ["Cc", "Zs", "Zl", "Zp"])
def test_every_control_and_separator_is_blank(category):
    found = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == category]
    assert found
    assert all(is_blank_character(c) for c in found)


def test_letters_digits_punctuation_and_symbols_are_not_blank():
    """Of the visible categories, only U+2800 and the Hangul fillers are blank (they draw
    nothing); of the marks, only the default-ignorable joiners and selectors."""
    blank_but_visible_category = {
        chr(c)
        for c in range(0x110000)
        if unicodedata.category(chr(c))[0] in "LNPSM" and is_blank_character(chr(c))
    }
    expected = {"\u2800", "\u115f", "\u1160", "\u3164", "\uffa0", "\u034f", "\u17b4", "\u17b5"}
    expected |= {"\u180b", "\u180c", "\u180d", "\u180f"}
    expected |= {chr(c) for c in [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]}
    assert blank_but_visible_category == expected


# -- properties ----------------------------------------------------------------------

BLANK_CHARACTERS = sorted(
    {chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and is_blank_character(chr(c))}
)
blank_texts = st.text(alphabet=st.sampled_from(BLANK_CHARACTERS), min_size=1, max_size=40)
visible_characters = st.characters(exclude_categories=["Cs"]).filter(
    lambda c: not is_blank_character(c)
)


@given(blank_texts)
def test_any_text_of_blank_characters_only_is_refused(text):
    assert is_blank(text)
    assert refusal(ConverseRequest, {"message": {"text": text}})[0] == "message.text"


@given(blank_texts, visible_characters, st.integers(min_value=0))
def test_one_visible_character_anywhere_among_blanks_is_enough(blanks, visible, where):
    at = where % (len(blanks) + 1)
    text = blanks[:at] + visible + blanks[at:]
    assert not is_blank(text)
    ConverseRequest.model_validate({"message": {"content": [{"text": text}]}})


# -- the documents' pattern ----------------------------------------------------------


def test_the_documents_pattern_agrees_with_the_check_on_the_basic_plane():
    pattern = re.compile(not_blank_pattern())
    disagree = [
        f"U+{c:04X}"
        for c in range(0x10000)
        if not 0xD800 <= c <= 0xDFFF
        and (pattern.search(chr(c)) is None) != is_blank_character(chr(c))
    ]
    assert disagree == []


def test_the_documents_pattern_is_plain_ranges_every_dialect_reads():
    """`\\uXXXX` escapes in one negated class: ECMA-262 (JSON Schema) and Python alike."""
    assert re.fullmatch(r"\[\^(?:\\u[0-9a-f]{4}(?:-\\u[0-9a-f]{4})?)+\]", not_blank_pattern())


def test_the_openapi_schema_carries_the_pattern_for_every_text():
    schema = ConverseRequest.model_json_schema()
    texts = [
        node
        for node in _walk(schema)
        if isinstance(node, dict) and node.get("minLength") == 1 and "pattern" in node
    ]
    assert len(texts) >= 3  # the message's text, a text block, a tool result's text
    assert all(node["pattern"] == not_blank_pattern() for node in texts)


def _walk(node: Any) -> Any:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)
