"""The trim cuts by tokens in every script: the head and the tail are the longest whose
estimates are within 400 tokens each, and the marker counts what is left out.

ASCII letters keep 1,969 characters each side (13 units each); a text whose
characters cost more keeps fewer (393 CJK ideographs at 65, 192 emoji at 133), and a
cut that lands between two characters of different costs keeps the one that still fits.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from memory_core.tokens import estimate_tokens, text_units, tokens_to_units
from memory_core.trim import (
    TrimShape,
    longest_within,
    omission_marker,
    trim_costed_text,
    trim_text,
    trim_turn,
)
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn
from tests.unit.test_tokens_by_script import any_script

SHAPE = TrimShape.for_budget(1000)
HEAD = tokens_to_units(400)
# The costs the expectations are written from (memory_core/tokens.py), in units, 64 a token.
LETTER, IDEOGRAPH, KANA, CYRILLIC, EMOJI = 13, 65, 50, 34, 133


def tokens(units: int) -> int:
    """Units as the estimate counts them in tokens: rounded up."""
    return -(-units // 64)


def cut(head: str, omitted: int, tail: str) -> str:
    return "\n".join(part for part in (head, omission_marker(omitted), tail) if part)


def test_a_cjk_message_exactly_at_its_budget_is_untouched_and_one_character_over_is_trimmed():
    clock = Clock()
    # 980 ideographs and 6 kana: 63,700 + 300 units, 1,000 tokens exactly.
    body = "語" * 980 + "の" * 6
    assert 980 * IDEOGRAPH + 6 * KANA == 64_000
    at_budget = turn(clock, "assistant", text(body))
    assert trim_turn(at_budget, SHAPE) is at_budget
    over = turn(clock, "assistant", text(body + "x"))
    trimmed = trim_turn(over, SHAPE)
    # The head holds 393 ideographs (25,545 units); the tail the x, the kana and 389 of
    # them (13 + 300 + 25,285 units). The 198 between are 12,870 units: 202 tokens.
    assert trimmed.content == [text(cut("語" * 393, 202, "語" * 389 + "の" * 6 + "x"))]
    assert tokens(198 * IDEOGRAPH) == 202
    assert trim_text(body, SHAPE) == body
    # Ideographs alone: 984 are 63,960 units, within; 985 are 64,025, over.
    assert trim_text("語" * 984, SHAPE) == "語" * 984
    assert trim_text("語" * 985, SHAPE) == cut("語" * 393, tokens(199 * IDEOGRAPH), "語" * 393)


def test_a_50000_character_cjk_input_keeps_800_tokens_not_3200_characters():
    clock = Clock()
    call = tool_use("t1", q="契" * 50_000)
    trimmed = trim_turn(turn(clock, "assistant", call), SHAPE)
    kept = trimmed.content[0]["toolUse"]["input"]["trimmedInput"]
    # The input's JSON text: {"q":" (five JSON marks and a letter, 93 units) and 392
    # ideographs fill the head's 25,600 units to 25,573; "} (32 units) and 393 the tail's
    # to 25,577.
    head = (HEAD - 5 * 16 - LETTER) // IDEOGRAPH
    tail = (HEAD - 2 * 16) // IDEOGRAPH
    assert (head, tail) == (392, 393)
    omitted = tokens((50_000 - head - tail) * IDEOGRAPH)
    assert kept == cut('{"q":"' + "契" * head, omitted, "契" * tail + '"}')


def test_the_head_ends_exactly_at_400_tokens_when_its_last_character_fits_exactly():
    # 1,959 ASCII letters (25,467 units) and an emoji (133): 25,600 units, all kept.
    assert 1959 * LETTER + EMOJI == HEAD
    body = "a" * 1959 + "😀" + "m" * 2000 + "z" * 1969
    assert longest_within(body, HEAD) == 1960
    # The 2,000 letters between are 26,000 units; 1,969 letters are the tail's 25,597.
    assert trim_text(body, SHAPE) == cut("a" * 1959 + "😀", tokens(2000 * LETTER), "z" * 1969)


def test_the_head_stops_before_a_character_that_would_cross_400_tokens():
    # 1,959 letters and a space are 25,468 units: the emoji after them would make 25,601.
    body = "a" * 1959 + " " + "😀" + "m" * 2000 + "z" * 1969
    assert longest_within(body, HEAD) == 1960
    omitted = tokens(EMOJI + 2000 * LETTER)
    assert trim_text(body, SHAPE) == cut("a" * 1959 + " ", omitted, "z" * 1969)


def test_a_tail_of_emoji_keeps_192_and_one_more_would_cross():
    # 192 emoji are 25,536 units, 193 would be 25,669.
    body = "m" * 4000 + "😀" * 300
    assert longest_within(body, HEAD, from_end=True) == 192
    omitted = tokens((4000 - 1969) * LETTER + (300 - 192) * EMOJI)
    assert trim_text(body, SHAPE) == cut("m" * 1969, omitted, "😀" * 192)


def test_cyrillic_is_cut_where_its_34_units_a_letter_stop_fitting():
    # 752 letters are 25,568 units, 753 would be 25,602: over 400 tokens' 25,600.
    body = "ж" * 3000
    assert longest_within(body, HEAD) == 752
    assert longest_within(body, HEAD, from_end=True) == 752
    assert trim_text(body, SHAPE) == cut("ж" * 752, tokens(1496 * CYRILLIC), "ж" * 752)


def test_longest_within_at_its_edges():
    assert longest_within("", HEAD) == 0
    assert longest_within("語語", 129) == 1
    assert longest_within("語語", 130) == 2
    assert longest_within("語語", 64) == 0
    assert longest_within("語語", 65) == 1
    assert longest_within("ab語", 64, from_end=True) == 0
    assert longest_within("ab語", 77, from_end=True) == 1
    assert longest_within("ab語", 78, from_end=True) == 2
    assert longest_within("ab語", 90, from_end=True) == 2
    assert longest_within("ab語", 91, from_end=True) == 3
    assert longest_within("a" * 10, 12) == 0
    assert longest_within("a" * 10, 13) == 1
    assert longest_within("a" * 10, 1000) == 10
    # A cheap start then a costly end: the search must look past the first probe.
    assert longest_within("a" * 100 + "😀" * 100, 100 * LETTER + 3 * EMOJI) == 103
    assert longest_within("a" * 100 + "😀" * 100, 100 * LETTER + 3 * EMOJI - 1) == 102
    assert longest_within("😀" * 100 + "a" * 100, 100 * LETTER + 3 * EMOJI, from_end=True) == 103
    assert (
        longest_within("😀" * 100 + "a" * 100, 100 * LETTER + 3 * EMOJI - 1, from_end=True) == 102
    )


def test_a_head_crossing_blocks_of_different_scripts_is_cut_in_the_block_it_ends_in():
    clock = Clock()
    # 300 ideographs (19,500 units), then Cyrillic: the 6,100 units left hold 179 letters
    # (6,086), then a long English block whose tail is kept.
    message = turn(
        clock, "assistant", text("語" * 300), text("ж" * 1000), text("e" * 5000 + "t" * 1969)
    )
    trimmed = trim_turn(message, SHAPE)
    assert (HEAD - 300 * IDEOGRAPH) // CYRILLIC == 179
    assert trimmed.content == [
        text("語" * 300),
        text(cut("ж" * 179, tokens(821 * CYRILLIC), "")),
        text(cut("", tokens(5000 * LETTER), "t" * 1969)),
    ]


def test_a_tail_crossing_blocks_is_cut_in_the_block_it_starts_in():
    clock = Clock()
    message = turn(
        clock, "user", text("h" * 1969 + "m" * 3000), tool_result("t1", "語" * 100 + "ж" * 900)
    )
    trimmed = trim_turn(message, SHAPE)
    # The tail: 900 Cyrillic letters are 30,600 units, more than 400 tokens: 752 are kept.
    omitted = tokens(100 * IDEOGRAPH + 148 * CYRILLIC)
    assert trimmed.content == [
        text(cut("h" * 1969, tokens(3000 * LETTER), "")),
        tool_result("t1", cut("", omitted, "ж" * 752)),
    ]


def test_a_text_costing_head_and_tail_together_is_never_cut_and_one_character_more_is():
    # A budget below head and tail together: only what they cannot hold is cut.
    shape = dataclasses.replace(SHAPE, max_message_tokens=10)
    # 390 ideographs and 5 kana: 25,350 + 250 units, 400 tokens exactly.
    half = "語" * 390 + "の" * 5
    assert 390 * IDEOGRAPH + 5 * KANA == HEAD
    clock = Clock()
    whole = turn(clock, "user", text(half + half))
    assert trim_turn(whole, shape) is whole
    several = turn(clock, "user", text(half), text(half))
    assert trim_turn(several, shape) is several
    # One kana more, 50 units: a token cut.
    one_more = turn(clock, "user", text(half), text("の" + half))
    assert trim_turn(one_more, shape).content == [text(half), text(cut("", 1, half))]
    assert trim_turn(turn(clock, "user", text(half + "の" + half)), shape).content == [
        text(cut(half, 1, half))
    ]


def test_a_message_of_several_blocks_in_cjk_at_its_budget_is_untouched():
    clock = Clock()
    # 984 ideographs (63,960 units), three letters (39) and a space: 64,000 units.
    assert 984 * IDEOGRAPH + 3 * LETTER + 1 == 64_000
    message = turn(clock, "assistant", text("語" * 500), text("語" * 484 + "abc "))
    assert trim_turn(message, SHAPE) is message
    over = turn(clock, "assistant", text("語" * 500), text("語" * 484 + "abc " + "e"))
    assert trim_turn(over, SHAPE) is not over


@given(any_script, st.integers(2, 1200))
def test_the_kept_ends_are_the_longest_within_their_budget_in_every_script(body, max_tokens):
    shape = TrimShape.for_budget(max_tokens)
    head_units, tail_units = tokens_to_units(shape.head_tokens), tokens_to_units(shape.tail_tokens)
    head = longest_within(body, head_units)
    tail = longest_within(body, tail_units, from_end=True)
    assert text_units(body[:head]) <= head_units
    assert head == len(body) or text_units(body[: head + 1]) > head_units
    assert text_units(body[len(body) - tail :]) <= tail_units
    assert tail == len(body) or text_units(body[len(body) - tail - 1 :]) > tail_units
    trimmed = trim_text(body, shape)
    if estimate_tokens(body) <= max_tokens or text_units(body) <= head_units + tail_units:
        assert trimmed == body
    else:
        assert trimmed == cut(
            body[:head], estimate_tokens(body[head : len(body) - tail]), body[len(body) - tail :]
        )


@given(any_script, st.integers(0, 3), st.integers(2, 1200))
def test_a_trimmed_texts_cost_is_added_up_exactly_from_what_it_kept(body, copies, max_tokens):
    shape = TrimShape.for_budget(max_tokens)
    body = body * (1 + copies * 200)
    kept, units = trim_costed_text(body, text_units(body), shape)
    assert kept == trim_text(body, shape)
    assert units == text_units(kept)
    assert (kept is body) == (kept == body)


def test_a_trimmed_texts_cost_counts_each_digit_of_its_marker_and_each_line_break():
    shape = TrimShape(max_message_tokens=2, head_tokens=1, tail_tokens=1)
    for body, lines in (
        ("😀" * 20, 1),
        ("a" * 8 + "😀" * 20, 2),
        ("a" * 8 + "😀" * 20 + "a" * 4, 3),
    ):
        kept, units = trim_costed_text(body, text_units(body), shape)
        assert len(kept.split("\n")) == lines
        assert units == text_units(kept)
    # A kana (50 units) fits a token where an ideograph (65) would not; the cost passed in
    # is the text's, 20,000 kana at 50 units, and the cut's 19,998 are 15,624 tokens.
    kept, units = trim_costed_text("の" * 20_000, 1_000_000, TrimShape(2, 1, 1))
    assert tokens(19_998 * KANA) == 15_624
    assert kept == "の\n… 15624 tokens omitted …\nの"
    # Two kana, two line breaks, and the marker: two ellipses (15 each), four spaces,
    # five digits and thirteen letters.
    assert units == 2 * KANA + 2 * 16 + 2 * 15 + 4 * 1 + 5 * 32 + 13 * LETTER
