"""A turn as recorded: its estimate, and a long text turn's cut, made once (`prepared`)."""

from __future__ import annotations

from memory_core import trim
from memory_core.tokens import text_units
from memory_core.trim import TrimShape, prepared, trim_costed_text
from memory_core.turns import TextCut
from tests.unit.conversation_builders import Clock, text, tool_use, turn

SHAPE = TrimShape.for_budget(1000)
LONG = "word " * 12_000  # 53 units a word


def test_a_short_turn_carries_its_estimate_and_no_cut():
    recorded = prepared(turn(Clock(), "user", text("Where is it?")), SHAPE)
    assert recorded.cost_units == 9 * 13 + 2 * 1 + 64
    assert recorded.text_cut is None


def test_a_long_text_turn_carries_its_cut_for_the_shape():
    recorded = prepared(turn(Clock(), "assistant", text(LONG)), SHAPE)
    assert recorded.cost_units == 12_000 * 53
    assert recorded.text_cut is not None
    assert recorded.text_cut.shape == (1000, 400, 400)
    assert (recorded.text_cut.head, recorded.text_cut.tail) == (483 * 5, 483 * 5 + 1)


def test_a_turn_exactly_at_the_budget_is_not_cut_and_one_word_over_is():
    # 1,000 tokens are 64,000 units: 1,207 words cost 63,971 and "wo" 26 more, 3 short;
    # the rest of that word is over.
    at = "word " * 1207 + "wo"
    assert text_units(at) == 64_000 - 3
    assert prepared(turn(Clock(), "user", text(at)), SHAPE).text_cut is None
    assert prepared(turn(Clock(), "user", text(at + "rd ")), SHAPE).text_cut is not None


def test_a_turn_of_other_blocks_carries_its_estimate_and_is_cut_when_read():
    recorded = prepared(turn(Clock(), "assistant", text("Let me look."), tool_use("t1")), SHAPE)
    assert recorded.cost_units is not None
    assert recorded.text_cut is None


def test_a_stored_cut_for_the_same_shape_is_used_and_one_for_another_is_not():
    units = text_units(LONG)
    own = TextCut(SHAPE.key, 10, 10, 7, 99)
    assert trim_costed_text(LONG, units, SHAPE, own) == (
        "word word \n… 7 tokens omitted …\nword word ",
        99,
    )
    other = TextCut((999, 400, 400), 10, 10, 7, 99)
    assert trim_costed_text(LONG, units, SHAPE, other) == trim_costed_text(LONG, units, SHAPE)


def test_new_content_drops_the_estimate_and_the_cut_and_neither_makes_turns_differ():
    original = turn(Clock(), "assistant", text(LONG))
    recorded = prepared(original, SHAPE)
    assert recorded == original
    changed = recorded.with_content([{"text": "short"}])
    assert (changed.cost_units, changed.text_cut) == (None, None)


def test_the_longest_head_is_found_in_a_few_short_stretches_not_by_reading_the_text(
    monkeypatch,
):
    # A 400-token head of a 120,000-character text: on text of even cost the walk costs
    # each character up to one past the head once, in a few stretches when it knows the
    # text's cost (its average), in a dozen when it starts from the usual one.
    costed: list[int] = []

    def watched(part: str) -> int:
        costed.append(len(part))
        return text_units(part)

    monkeypatch.setattr(trim, "text_units", watched)
    text, head = LONG * 2, 483 * 5
    for known, stretches in ((text_units(text), 4), (None, 12)):
        for from_end, kept in ((False, head), (True, head + 1)):
            costed.clear()
            found = trim.longest_within(text, 25_600, from_end=from_end, text_units_known=known)
            assert found == kept
            assert len(costed) <= stretches
            assert sum(costed) <= kept + 1
