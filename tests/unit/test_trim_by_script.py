"""The trim cuts by tokens in every script: the head and the tail are the longest whose
estimates are within 400 tokens each, and the marker counts what is left out.

ASCII text keeps 1,600 characters each side, as it always has; a text whose
characters cost more keeps fewer (400 CJK ideographs, 200 emoji), and a cut that
lands between two characters of different costs keeps the one that still fits.
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


def cut(head: str, omitted: int, tail: str) -> str:
    return "\n".join(part for part in (head, omission_marker(omitted), tail) if part)


def test_a_cjk_message_exactly_at_its_budget_is_untouched_and_one_character_over_is_trimmed():
    clock = Clock()
    at_budget = turn(clock, "assistant", text("語" * 1000))
    assert trim_turn(at_budget, SHAPE) is at_budget
    over = turn(clock, "assistant", text("語" * 1000 + "x"))
    trimmed = trim_turn(over, SHAPE)
    # 400 ideographs each side (a token each); 200 of them and the x left out: 201 tokens.
    assert trimmed.content == [text(cut("語" * 400, 201, "語" * 399 + "x"))]
    assert trim_text("語" * 1000, SHAPE) == "語" * 1000
    assert trim_text("語" * 1001, SHAPE) == cut("語" * 400, 201, "語" * 400)


def test_a_50000_character_cjk_input_keeps_800_tokens_not_3200_characters():
    clock = Clock()
    call = tool_use("t1", q="契" * 50_000)
    trimmed = trim_turn(turn(clock, "assistant", call), SHAPE)
    kept = trimmed.content[0]["toolUse"]["input"]["trimmedInput"]
    # The input's JSON text: {"q":" (6 ASCII characters, 1.5 tokens) and 398 ideographs fill
    # the head's 400 tokens to 399.5; "} (half a token) and 399 ideographs the tail's.
    assert kept == cut('{"q":"' + "契" * 398, 50_000 - 398 - 399, "契" * 399 + '"}')


def test_the_head_ends_exactly_at_400_tokens_when_its_last_character_fits_exactly():
    # 1,596 ASCII letters (399 tokens) and a 語 (1 token): 400 tokens, all kept.
    body = "a" * 1596 + "語" + "m" * 2000 + "z" * 1600
    assert longest_within(body, HEAD) == 1597
    assert trim_text(body, SHAPE) == cut("a" * 1596 + "語", 500, "z" * 1600)


def test_the_head_stops_before_a_character_that_would_cross_400_tokens():
    # 1,599 letters are 399.75 tokens: the 語 after them would make 400.75.
    body = "a" * 1599 + "語" + "m" * 2000 + "z" * 1600
    assert longest_within(body, HEAD) == 1599
    assert trim_text(body, SHAPE) == cut("a" * 1599, 501, "z" * 1600)


def test_a_tail_of_emoji_keeps_200_and_one_more_would_cross():
    body = "m" * 4000 + "😀" * 300
    assert longest_within(body, HEAD, from_end=True) == 200
    assert trim_text(body, SHAPE) == cut("m" * 1600, 800, "😀" * 200)


def test_cyrillic_is_cut_where_its_33_units_a_letter_stop_fitting():
    # 775 letters are 25,575 units, 776 would be 25,608: over 400 tokens' 25,600.
    body = "ж" * 3000
    assert longest_within(body, HEAD) == 775
    assert longest_within(body, HEAD, from_end=True) == 775
    assert trim_text(body, SHAPE) == cut("ж" * 775, estimate_tokens("ж" * 1450), "ж" * 775)


def test_longest_within_at_its_edges():
    assert longest_within("", HEAD) == 0
    assert longest_within("語語", 127) == 1
    assert longest_within("語語", 128) == 2
    assert longest_within("語語", 63) == 0
    assert longest_within("ab語", 47, from_end=True) == 0
    assert longest_within("ab語", 80, from_end=True) == 2
    assert longest_within("ab語", 96, from_end=True) == 3
    assert longest_within("a" * 10, 15) == 0
    assert longest_within("a" * 10, 16) == 1
    assert longest_within("a" * 10, 1000) == 10
    # A cheap start then a costly end: the search must look past the first probe.
    assert longest_within("a" * 100 + "😀" * 100, 1600 + 128 * 3) == 103
    assert longest_within("😀" * 100 + "a" * 100, 1600 + 128 * 3, from_end=True) == 103


def test_a_head_crossing_blocks_of_different_scripts_is_cut_in_the_block_it_ends_in():
    clock = Clock()
    # 300 ideographs (300 tokens), then Cyrillic: 100 tokens more is 193 letters (6,369
    # units of the 6,400 left), then a long English block whose tail is kept.
    message = turn(
        clock, "assistant", text("語" * 300), text("ж" * 1000), text("e" * 5000 + "t" * 1600)
    )
    trimmed = trim_turn(message, SHAPE)
    assert trimmed.content == [
        text("語" * 300),
        text(cut("ж" * 193, estimate_tokens("ж" * 807), "")),
        text(cut("", estimate_tokens("e" * 5000), "t" * 1600)),
    ]


def test_a_tail_crossing_blocks_is_cut_in_the_block_it_starts_in():
    clock = Clock()
    message = turn(
        clock, "user", text("h" * 1600 + "m" * 3000), tool_result("t1", "語" * 100 + "ж" * 900)
    )
    trimmed = trim_turn(message, SHAPE)
    # The tail: 900 Cyrillic letters are 463 tokens, more than 400: 775 of them are kept.
    assert trimmed.content == [
        text(cut("h" * 1600, 750, "")),
        tool_result("t1", cut("", estimate_tokens("語" * 100 + "ж" * 125), "ж" * 775)),
    ]


def test_a_text_costing_head_and_tail_together_is_never_cut_and_one_character_more_is():
    # A budget below head and tail together: only what they cannot hold is cut.
    shape = dataclasses.replace(SHAPE, max_message_tokens=10)
    clock = Clock()
    whole = turn(clock, "user", text("語" * 800))
    assert trim_turn(whole, shape) is whole
    several = turn(clock, "user", text("語" * 400), text("語" * 400))
    assert trim_turn(several, shape) is several
    one_more = turn(clock, "user", text("語" * 400), text("語" * 401))
    assert trim_turn(one_more, shape).content == [text("語" * 400), text(cut("", 1, "語" * 400))]
    assert trim_turn(turn(clock, "user", text("語" * 801)), shape).content == [
        text(cut("語" * 400, 1, "語" * 400))
    ]


def test_a_message_of_several_blocks_in_cjk_at_its_budget_is_untouched():
    clock = Clock()
    message = turn(clock, "assistant", text("語" * 500), text("語" * 496 + "abcd" * 4))
    assert trim_turn(message, SHAPE) is message
    over = turn(clock, "assistant", text("語" * 500), text("語" * 496 + "abcd" * 4 + "e"))
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
    kept, units = trim_costed_text("語" * 20_000, 1_280_000, TrimShape(2, 1, 1))
    assert kept == "語\n… 19998 tokens omitted …\n語"
    assert units == 64 * 2 + 16 * (2 + len("… 19998 tokens omitted …"))
