"""The estimate's cost of a character, by script: each block's edges, and its arithmetic.

Every run of blocks in memory_core/tokens.py is pinned at both its edges, with the
cost written out here (not read from the module), so that moving an edge or a cost
by one is seen. The properties draw text from every script.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_core.tokens import (
    ASCII_UNITS,
    LATIN1_UNITS,
    UNITS_PER_TOKEN,
    block_chars,
    block_units,
    chars_to_tokens,
    content_units,
    estimate_content_tokens,
    estimate_tokens,
    text_units,
    tokens_to_chars,
    tokens_to_units,
    units_to_tokens,
)
from tests.unit.conversation_builders import text, tool_result, tool_use

EDGES = [
    # (a character, what it costs), the first and the last of each run of blocks.
    ("\x00", 16),
    ("\x7f", 16),
    ("\x80", 32),
    ("\xff", 32),
    ("\u0100", 160),
    ("\u02ff", 160),
    ("\u0300", 72),
    ("\u03ff", 72),
    ("\u0400", 33),
    ("\u04ff", 33),
    ("\u0500", 56),
    ("\u07ff", 56),
    ("\u0800", 64),
    ("\u08ff", 64),
    ("\u0900", 72),
    ("\u0dff", 72),
    ("\u0e00", 96),
    ("\u0eff", 96),
    ("\u0f00", 64),
    ("\u1dff", 64),
    ("\u1e00", 160),
    ("\u1eff", 160),
    ("\u1f00", 72),
    ("\u1fff", 72),
    ("\u2000", 16),
    ("\u20ff", 16),
    ("\u2100", 64),
    ("\u22ff", 64),
    ("\u2300", 128),
    ("\u23ff", 128),
    ("\u2400", 64),
    ("\u24ff", 64),
    ("\u2500", 16),
    ("\u25ff", 16),
    ("\u2600", 128),
    ("\u27ff", 128),
    ("\u2800", 64),
    ("\u2aff", 64),
    ("\u2b00", 128),
    ("\u2bff", 128),
    ("\u2c00", 64),
    ("\u2fff", 64),
    ("\u3000", 48),
    ("\u30ff", 48),
    ("\u3100", 64),
    ("\uabff", 64),
    ("\uac00", 80),
    ("\ud7ff", 80),
    ("\ud800", 128),  # a lone surrogate, as a str may hold one: costed as an astral character
    ("\udbff", 128),
    ("\udc00", 0),
    ("\udfff", 0),
    ("\ue000", 64),
    ("\ufaff", 64),
    ("\ufb00", 56),
    ("\ufdff", 56),
    ("\ufe00", 64),
    ("\uffff", 64),
    ("\U00010000", 128),
    ("\U0001f600", 128),
    ("\U0010ffff", 128),
]


@pytest.mark.parametrize(("character", "units"), EDGES, ids=[f"U+{ord(c):04X}" for c, _ in EDGES])
def test_each_block_costs_what_its_script_does_at_both_edges(character, units):
    assert text_units(character) == units
    # Beside a character of another script, and beside itself: the cost adds up.
    assert text_units(character + "é") == units + 32
    assert text_units("a" + character + character) == ASCII_UNITS + 2 * units


def test_ascii_costs_a_quarter_token_a_character_with_or_without_other_scripts():
    assert (ASCII_UNITS, LATIN1_UNITS, UNITS_PER_TOKEN) == (16, 32, 64)
    assert text_units("") == 0
    assert text_units("abc") == 48
    assert text_units("abc\x7fé") == 4 * 16 + 32
    assert text_units("\x80\x7f\x00") == 32 + 16 + 16


@pytest.mark.parametrize(
    ("sample", "units"),
    [
        ("Größe", 3 * 16 + 2 * 32),
        ("Привет", 6 * 33),
        ("שלום", 4 * 56),
        ("مرحبا", 5 * 56),
        ("Καλημέρα", 8 * 72),
        ("こんにちは", 5 * 48),
        ("カタカナ", 4 * 48),
        ("日本語", 3 * 64),
        ("안녕하세요", 5 * 80),
        ("नमस्ते", 6 * 72),
        ("สวัสดี", 6 * 96),
        ("Việt", 3 * 16 + 160),
        ("Łódź", 160 + 32 + 16 + 160),
        ("“quoted” — yes…", 15 * 16),
        ("，。", 64 + 48),
        ("❤️", 128 + 64),
        ("👨\u200d👩\u200d👧", 3 * 128 + 2 * 16),
        ("🇯🇵", 2 * 128),
    ],
)
def test_a_word_costs_what_its_characters_do(sample, units):
    assert text_units(sample) == units


def test_units_round_up_to_tokens_once():
    assert [units_to_tokens(u) for u in (0, 1, 63, 64, 65, 128, 129)] == [0, 1, 1, 1, 2, 2, 3]
    assert tokens_to_units(0) == 0
    assert tokens_to_units(3) == 192


def test_a_cjk_text_at_exactly_a_thousand_tokens_and_one_character_over():
    assert estimate_tokens("語" * 1000) == 1000
    assert estimate_tokens("語" * 1000 + "x") == 1001
    assert estimate_tokens("語" * 999 + "xxxx") == 1000


def test_a_cyrillic_text_rounds_at_its_own_boundary():
    # 64 Cyrillic letters are 33 tokens exactly; one ASCII character more is 34.
    assert estimate_tokens("ж" * 64) == 33
    assert estimate_tokens("ж" * 64 + "a") == 34
    assert estimate_tokens("ж" * 63) == 33


def test_an_emoji_is_two_tokens_and_a_latin1_letter_half_of_one():
    assert estimate_tokens("😀" * 5) == 10
    assert estimate_tokens("é" * 5) == 3


def test_a_message_of_mixed_scripts_rounds_once_over_all_its_blocks():
    # 語 (64) and a (16) are 80 units: 2 tokens together, as apart they would be 2 too;
    # three quarter-token letters beside a Latin-1 letter (32) make exactly one token.
    assert content_units([text("語"), text("a")]) == 80
    assert estimate_content_tokens([text("語"), text("a")]) == 2
    assert estimate_content_tokens([text("abc"), text("é"), text("ab")]) == 2
    assert estimate_content_tokens([text("ab"), text("é")]) == 1


def test_a_tool_block_costs_its_json_text_in_every_script():
    call = tool_use("t1", name="検索", q="契約書")
    as_sent = '{"toolUse":{"toolUseId":"t1","name":"検索","input":{"q":"契約書"}}}'
    assert block_units(call) == text_units(as_sent) == 57 * 16 + 5 * 64
    result = tool_result("t1", "Привет")
    as_sent = '{"toolResult":{"toolUseId":"t1","content":[{"text":"Привет"}]}}'
    assert block_units(result) == text_units(as_sent) == 57 * 16 + 6 * 33
    assert content_units([text("é"), call]) == 32 + block_units(call)
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
    assert block_units(image) == 0
    assert block_units(text("語")) == 64


def test_the_ascii_conversions_count_ascii_characters():
    assert [chars_to_tokens(n) for n in (0, 1, 4, 5)] == [0, 1, 1, 2]
    assert tokens_to_chars(3) == 12
    assert block_chars(text("語語")) == 2
    assert block_chars(tool_use("t1", q="x")) == len(
        '{"toolUse":{"toolUseId":"t1","name":"lookup","input":{"q":"x"}}}'
    )


# -- properties: text drawn from every script ---------------------------------------------

SCRIPTS = (
    "abc xyz 012 {}:,",  # ASCII
    "éüßñçàô«»",  # Latin-1
    "ąęłśżřčůşğđơư",  # Latin Extended
    "ạảấầẩẫậếềểễệ",  # Latin Extended Additional (Vietnamese)
    "αβγδεζηθλμπσω",  # Greek
    "абвгдежзийклмнопрстуфхцчшщьюяіїєґ",  # Cyrillic
    "אבגדהוזחטיכלמנסעפצקרשת",  # Hebrew
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",  # Arabic
    "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",  # Devanagari
    "กขคงจฉชซญดตถทนบปผพฟมยรลวสหอฮ",  # Thai
    "“”‘’–—…•€",  # general punctuation
    "→≤∑⌘①─│■☀★✅❤⭐",  # symbols
    "。、「」あいうえおかきくけこアイウエオカキクケコ",  # kana
    "日本語中文漢字合同条款违约责任",  # CJK ideographs
    "가나다라마바사아자차카타파하",  # Hangul
    "，！？（）：ｱｲｳ",  # fullwidth and halfwidth forms
    "\ufe0f\ufeff",  # variation selector, byte order mark
    "😀😂🔥👍🏽🇯🇵🧁",  # beyond the BMP
)
any_script = st.text(alphabet=st.sampled_from("".join(SCRIPTS))) | st.text()


@given(any_script, any_script)
def test_the_cost_of_texts_put_together_is_the_sum_of_their_costs(left, right):
    assert text_units(left + right) == text_units(left) + text_units(right)
    assert estimate_tokens(left) <= estimate_tokens(left + right)
    assert estimate_tokens(left + right) <= estimate_tokens(left) + estimate_tokens(right)


@given(any_script)
def test_a_text_costs_its_characters_each_a_quarter_token_to_two_and_a_half(body):
    assert text_units(body) == sum(text_units(character) for character in body)
    assert ASCII_UNITS * len(body) <= text_units(body) <= 160 * len(body)
    assert estimate_tokens(body) == -(-text_units(body) // UNITS_PER_TOKEN)
    assert (text_units(body) == ASCII_UNITS * len(body)) == all(
        text_units(c) == ASCII_UNITS for c in body
    )
