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
    CHEAPEST_UNITS,
    UNITS_PER_TOKEN,
    block_units,
    content_units,
    estimate_content_tokens,
    estimate_tokens,
    text_units,
    tokens_to_units,
    units_to_tokens,
)
from tests.unit.conversation_builders import text, tool_result, tool_use

LOW = [
    # (a character of the first 256 code points, what it costs), each kind at its edges.
    ("\x00", 16),  # control characters: a newline, a tab
    ("\t", 16),
    ("\n", 16),
    ("\x1f", 16),
    (" ", 1),  # a space joins the word after it
    ("!", 64),  # a punctuation mark is a token of its own
    ('"', 16),  # JSON's quotes, brackets, colons and commas: `":"` is one token
    ("'", 64),
    (",", 16),
    ("/", 64),
    ("0", 32),  # a digit: two a token
    ("9", 32),
    (":", 16),
    (";", 64),
    ("@", 64),
    ("A", 13),  # a letter: an English word of five letters is a token
    ("Z", 13),
    ("[", 16),
    ("\\", 64),
    ("]", 16),
    ("`", 64),
    ("a", 13),
    ("z", 13),
    ("{", 16),
    ("|", 64),
    ("}", 16),
    ("~", 64),
    ("\x7f", 16),
    ("\x80", 32),  # Latin-1's symbols: NBSP, «, °
    ("\xa0", 32),
    ("\xbf", 32),
    ("\xc0", 153),  # Latin-1's letters: the European word each is in
    ("\xd6", 153),
    ("\xd7", 32),  # ×
    ("\xd8", 153),
    ("\xf6", 153),
    ("\xf7", 32),  # ÷
    ("\xff", 153),
]

EDGES = [
    # (a character, what it costs), the first and the last of each run of blocks.
    ("\u0100", 200),
    ("\u02ff", 200),
    ("\u0300", 68),
    ("\u03ff", 68),
    ("\u0400", 34),
    ("\u04ff", 34),
    ("\u0500", 55),
    ("\u07ff", 55),
    ("\u0800", 64),
    ("\u08ff", 64),
    ("\u0900", 76),
    ("\u0dff", 76),
    ("\u0e00", 101),
    ("\u0eff", 101),
    ("\u0f00", 64),
    ("\u1dff", 64),
    ("\u1e00", 100),
    ("\u1eff", 100),
    ("\u1f00", 72),
    ("\u1fff", 72),
    ("\u2000", 15),
    ("\u20ff", 15),
    ("\u2100", 64),
    ("\u22ff", 64),
    ("\u2300", 122),
    ("\u23ff", 122),
    ("\u2400", 64),
    ("\u24ff", 64),
    ("\u2500", 16),
    ("\u25ff", 16),
    ("\u2600", 122),
    ("\u27ff", 122),
    ("\u2800", 64),
    ("\u2aff", 64),
    ("\u2b00", 134),
    ("\u2bff", 134),
    ("\u2c00", 64),
    ("\u2fff", 64),
    ("\u3000", 50),
    ("\u30ff", 50),
    ("\u3100", 65),
    ("\uabff", 65),
    ("\uac00", 76),
    ("\ud7ff", 76),
    ("\ud800", 133),  # a lone surrogate, as a str may hold one: costed as an astral character
    ("\udbff", 133),
    ("\udc00", 0),
    ("\udfff", 0),
    ("\ue000", 64),
    ("\ufaff", 64),
    ("\ufb00", 56),
    ("\ufdff", 56),
    ("\ufe00", 62),
    ("\uffff", 62),
    ("\U00010000", 133),
    ("\U0001f600", 133),
    ("\U0010ffff", 133),
]


@pytest.mark.parametrize(
    ("character", "units"), LOW + EDGES, ids=[f"U+{ord(c):04X}" for c, _ in LOW + EDGES]
)
def test_each_kind_of_character_costs_what_it_does_at_its_edges(character, units):
    assert text_units(character) == units
    # Beside a character of another script, and beside itself: the cost adds up.
    assert text_units(character + "é") == units + 153
    assert text_units("a" + character + character) == 13 + 2 * units
    assert text_units(character + "語" + character) == 65 + 2 * units


def test_ascii_costs_by_kind_with_or_without_other_scripts():
    assert UNITS_PER_TOKEN == 64
    assert text_units("") == 0
    assert text_units("abc") == 39
    assert text_units("Hello, world.") == 10 * 13 + 16 + 1 + 64
    assert text_units('{"n":12}') == 5 * 16 + 13 + 2 * 32
    assert text_units("abc\x7fé") == 3 * 13 + 16 + 153
    assert text_units("\x80\x7f\x00") == 32 + 16 + 16
    # The cheapest character, which bounds how long a head of a given cost can be.
    assert CHEAPEST_UNITS == 1
    assert min(text_units(chr(code)) for code in range(0xD800)) == CHEAPEST_UNITS


@pytest.mark.parametrize(
    ("sample", "units"),
    [
        ("Größe", 3 * 13 + 2 * 153),
        ("Привет", 6 * 34),
        ("שלום", 4 * 55),
        ("مرحبا", 5 * 55),
        ("Καλημέρα", 8 * 68),
        ("こんにちは", 5 * 50),
        ("カタカナ", 4 * 50),
        ("日本語", 3 * 65),
        ("안녕하세요", 5 * 76),
        ("नमस्ते", 6 * 76),
        ("สวัสดี", 6 * 101),
        ("Việt", 3 * 13 + 100),
        ("Łódź", 200 + 153 + 13 + 200),
        ("“quoted” — yes…", 4 * 15 + 9 * 13 + 2 * 1),
        ("，。", 62 + 50),
        ("❤️", 122 + 62),
        ("👨\u200d👩\u200d👧", 3 * 133 + 2 * 15),
        ("🇯🇵", 2 * 133),
        ("+1 555-0100", 64 + 32 + 1 + 3 * 32 + 64 + 4 * 32),
    ],
)
def test_a_word_costs_what_its_characters_do(sample, units):
    assert text_units(sample) == units


def test_units_round_up_to_tokens_once():
    assert [units_to_tokens(u) for u in (0, 1, 63, 64, 65, 128, 129)] == [0, 1, 1, 1, 2, 2, 3]
    assert tokens_to_units(0) == 0
    assert tokens_to_units(3) == 192


def test_a_cjk_text_at_exactly_a_token_boundary_and_one_character_over():
    # 64 ideographs are 4,160 units: 65 tokens exactly.
    assert estimate_tokens("語" * 64) == 65
    assert estimate_tokens("語" * 64 + "x") == 66
    assert estimate_tokens("語" * 63 + "x") == 65


def test_a_cyrillic_text_rounds_at_its_own_boundary():
    # 32 Cyrillic letters are 17 tokens exactly; one ASCII letter more is 18.
    assert estimate_tokens("ж" * 32) == 17
    assert estimate_tokens("ж" * 32 + "a") == 18
    assert estimate_tokens("ж" * 31) == 17


def test_an_emoji_is_about_two_tokens_and_an_accented_letter_more():
    assert estimate_tokens("😀" * 5) == 11
    assert estimate_tokens("é" * 5) == 12
    assert estimate_tokens("1" * 10) == 5


def test_a_message_of_mixed_scripts_rounds_once_over_all_its_blocks():
    # 語 (65) and a (13) are 78 units: 2 tokens together, as apart they would be 2 too;
    # five letters are 65 units, a token and one unit: twice, 3 tokens, not 4.
    assert content_units([text("語"), text("a")]) == 78
    assert estimate_content_tokens([text("語"), text("a")]) == 2
    assert estimate_content_tokens([text("abcde"), text("fghij")]) == 3
    assert estimate_content_tokens([text("abcde")]) == 2
    assert estimate_content_tokens([text("ab"), text("é")]) == 3


def test_a_tool_block_costs_its_json_text_in_every_script():
    call = tool_use("t1", name="検索", q="契約書")
    as_sent = '{"toolUse":{"toolUseId":"t1","name":"検索","input":{"q":"契約書"}}}'
    assert block_units(call) == text_units(as_sent) == 27 * 13 + 1 * 32 + 29 * 16 + 5 * 65
    result = tool_result("t1", "Привет")
    as_sent = '{"toolResult":{"toolUseId":"t1","content":[{"text":"Привет"}]}}'
    assert block_units(result) == text_units(as_sent) == 31 * 13 + 1 * 32 + 25 * 16 + 6 * 34
    assert content_units([text("é"), call]) == 153 + block_units(call)
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
    assert block_units(image) == 0
    assert block_units(text("語")) == 65


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
def test_a_text_costs_its_characters_each_from_the_cheapest_to_about_three_tokens(body):
    assert text_units(body) == sum(text_units(character) for character in body)
    assert CHEAPEST_UNITS * len(body) <= text_units(body) <= 200 * len(body)
    assert estimate_tokens(body) == -(-text_units(body) // UNITS_PER_TOKEN)
