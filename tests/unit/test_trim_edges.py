"""The trim at its edges (SPEC 5.5.1, 5.5.8): one character either side of each limit.

A message exactly at its budget is untouched and one token over is trimmed,
whatever its blocks; a cut of one character is marked like any other; a block
wholly inside the kept head or tail comes through as it was, with no marker;
and the marker's own size is the one thing a trimmed message may add over
its budget.
"""

from __future__ import annotations

import json

import pytest

from memory_core.tokens import (
    chars_to_tokens,
    estimate_content_tokens,
    estimate_turn_tokens,
    tokens_to_chars,
)
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, omission_marker, trim_text, trim_turn
from tests.unit.conversation_builders import Clock, text, tool_use, turn

SHAPE = TrimShape.for_budget(1000)
# The smallest budget whose head and tail are still the full 400 tokens each.
TIGHT = TrimShape.for_budget(800)


def test_a_message_of_several_blocks_exactly_at_its_budget_is_untouched():
    clock = Clock()
    # 2,001 + 1,999 characters: 1,000 tokens as one message (501 + 500 block by block).
    message = turn(clock, "assistant", text("a" * 2001), text("b" * 1999))
    assert estimate_turn_tokens(message) == SHAPE.max_message_tokens
    assert trim_turn(message, SHAPE) is message


def test_a_message_of_several_blocks_one_token_over_its_budget_is_trimmed_as_one_string():
    clock = Clock()
    message = turn(clock, "assistant", text("a" * 2001), text("b" * 2000))
    assert estimate_turn_tokens(message) == SHAPE.max_message_tokens + 1
    trimmed = trim_turn(message, SHAPE)
    # 4,001 characters less the 3,200 kept: 401 cut from the first block, 400 from the second.
    assert trimmed.content == [
        text("a" * 1600 + "\n" + omission_marker(101)),
        text(omission_marker(100) + "\n" + "b" * 1600),
    ]


def test_a_one_character_cut_is_marked_with_the_one_token_it_costs():
    body = "h" * 1600 + "m" + "t" * 1600
    assert trim_text(body, TIGHT) == "h" * 1600 + "\n… 1 tokens omitted …\n" + "t" * 1600


def test_blocks_ending_on_the_head_and_starting_on_the_tail_are_untouched():
    clock = Clock()
    head, middle, tail = text("h" * 1600), text("m"), text("t" * 1600)
    trimmed = trim_turn(turn(clock, "user", head, middle, tail), TIGHT)
    # Only the one character between them is cut; no block is left empty.
    assert trimmed.content == [head, text("… 1 tokens omitted …"), tail]


def test_blocks_wholly_inside_the_head_or_the_tail_carry_no_marker():
    clock = Clock()
    # The head's second block ends on its last character; the tail's first starts it.
    head = [text("a" * 1000), text("b" * 600)]
    tail = [text("c" * 600), text("d" * 1000)]
    trimmed = trim_turn(turn(clock, "assistant", *head, text("m" * 2000), *tail), SHAPE)
    # Never a "… 0 tokens omitted …" on a block that lost nothing.
    assert trimmed.content == [*head, text(omission_marker(500)), *tail]


def test_a_one_block_turn_is_trimmed_to_head_marker_and_tail_and_keeps_its_identity():
    clock = Clock()
    original = turn(clock, "user", text("H" * 1600 + "M" * 6800 + "T" * 1600))
    trimmed = trim_turn(original, SHAPE)
    assert trimmed.content == [text("H" * 1600 + "\n… 1700 tokens omitted …\n" + "T" * 1600)]
    assert (trimmed.id, trimmed.role, trimmed.sent_at, trimmed.recorded_at) == (
        original.id,
        original.role,
        original.sent_at,
        original.recorded_at,
    )


def test_a_call_over_its_budget_only_by_its_id_name_and_keys_is_untouched_until_its_input_is_cut():
    clock = Clock()
    # An input of exactly head + tail characters of JSON text: nothing to cut.
    within = tool_use("c", name="n", b="d" * 3192)
    assert len(json.dumps(within["toolUse"]["input"], separators=(",", ":"))) == 3200
    message = turn(clock, "assistant", within)
    assert estimate_turn_tokens(message) > TIGHT.max_message_tokens
    assert trim_turn(message, TIGHT) is message
    # One character more, and that one character is cut and counted.
    over = tool_use("c", name="n", b="d" * 3193)
    (block,) = trim_turn(turn(clock, "assistant", over), TIGHT).content
    input_text = '{"b":"' + "d" * 3193 + '"}'
    assert block["toolUse"]["input"] == {
        TRIMMED_INPUT_KEY: input_text[:1600] + "\n… 1 tokens omitted …\n" + input_text[-1600:]
    }


def test_a_trimmed_message_may_exceed_its_budget_by_its_marker_line_and_no_more():
    """Decision: the marker is added to head and tail, not carved out of them.

    SPEC 2 gives `HISTORY_MESSAGE_MAX_TOKENS` as the size over which a message
    is trimmed, and fixes the trim's shape: head and tail of 400 tokens each,
    capped at half the setting, with the marker on its own line between them
    (SPEC 5.5.1). At a setting of 800 or a little above, that shape is over the
    setting by the marker line: 3,201 characters trimmed for 800 come out as
    806 tokens. Carving the marker out of head and tail would contradict the
    spec's figures, and could never hold for a setting below the marker's own
    size without a silent cut, which is forbidden. The window's budget is not
    affected: it counts each trimmed message as kept, marker included.
    """
    body = "x" * 3201
    trimmed = trim_text(body, TIGHT)
    marker_line = "\n" + omission_marker(1) + "\n"
    assert trimmed == "x" * 1600 + marker_line + "x" * 1600
    assert chars_to_tokens(len(trimmed)) == 806
    assert chars_to_tokens(len(trimmed)) > TIGHT.max_message_tokens
    # At the default setting even a marker of seven digits stays within the budget.
    huge = trim_text("x" * 4_000_004, SHAPE)
    kept = tokens_to_chars(SHAPE.head_tokens + SHAPE.tail_tokens)
    assert len(huge) == kept + len("\n" + omission_marker(999_201) + "\n")
    assert estimate_content_tokens([text(huge)]) <= SHAPE.max_message_tokens


@pytest.mark.parametrize("length", [100, 3200])
def test_a_text_no_longer_than_head_and_tail_together_is_never_cut(length: int) -> None:
    # A shape whose head and tail (400 tokens each, 3,200 characters together) outgrow its
    # budget, as one built by hand may: cutting would keep every character anyway.
    shape = TrimShape(max_message_tokens=10, head_tokens=400, tail_tokens=400)
    original = turn(Clock(), "user", text("x" * length))
    assert trim_turn(original, shape) is original


def test_one_character_past_head_and_tail_is_cut() -> None:
    shape = TrimShape(max_message_tokens=10, head_tokens=400, tail_tokens=400)
    original = turn(Clock(), "user", text("x" * 3201))
    trimmed = trim_turn(original, shape)
    assert trimmed is not original
    assert "omitted" in trimmed.content[0]["text"]


def test_what_the_cut_does_not_reach_is_kept_as_it_was_images_included() -> None:
    image = {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k.png"}}}}
    result = {
        "toolResult": {
            "toolUseId": "t1",
            "content": [{"text": "first"}, image, {"text": "y" * 8000}, {"text": "last"}],
        }
    }
    original = turn(Clock(), "user", result, text("question"), image)
    trimmed = trim_turn(original, TrimShape.for_budget(1000))
    items = trimmed.content[0]["toolResult"]["content"]
    assert items[0] == {"text": "first"}
    assert items[1] == image
    assert "omitted" in items[2]["text"]
    assert items[3] == {"text": "last"}
    assert list(trimmed.content[1:]) == [text("question"), image]
