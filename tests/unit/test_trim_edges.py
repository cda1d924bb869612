"""The trim at its edges (SPEC 5.5.1, 5.5.8): one character either side of each limit.

A message exactly at its budget is untouched and one token over is trimmed,
whatever its blocks; a cut of one character is marked like any other; a block
wholly inside the kept head or tail comes through as it was, with no marker;
and the marker's own size is the one thing a trimmed message may add over
its budget.
"""

from __future__ import annotations

import pytest

from memory_core.tokens import estimate_content_tokens, estimate_tokens, estimate_turn_tokens
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, omission_marker, trim_text, trim_turn
from tests.unit.conversation_builders import Clock, text, tool_use, turn

SHAPE = TrimShape.for_budget(1000)
# The smallest budget whose head and tail are still the full 400 tokens each.
TIGHT = TrimShape.for_budget(800)
# The costs the expectations are written from (memory_core/tokens.py), in units, 64 a token.
LETTER, LINE_BREAK = 13, 16
# The most ASCII letters within 400 tokens: 1,969 of them are 25,597 units, 1,970 are 25,610.
END = 25_600 // LETTER


def tokens(units: int) -> int:
    """Units as the estimate counts them in tokens: rounded up."""
    return -(-units // 64)


def test_a_message_of_several_blocks_exactly_at_its_budget_is_untouched():
    clock = Clock()
    # 32,006 + 31,994 units: 1,000 tokens as one message (501 + 500 block by block).
    message = turn(clock, "assistant", text("a" * 2462), text("b" * 2461 + " "))
    assert 2462 * LETTER + 2461 * LETTER + 1 == 64_000
    assert (tokens(2462 * LETTER), tokens(2461 * LETTER + 1)) == (501, 500)
    assert estimate_turn_tokens(message) == SHAPE.max_message_tokens
    assert trim_turn(message, SHAPE) is message


def test_a_message_of_several_blocks_one_token_over_its_budget_is_trimmed_as_one_string():
    clock = Clock()
    message = turn(clock, "assistant", text("a" * 2462), text("b" * 2462))
    assert estimate_turn_tokens(message) == SHAPE.max_message_tokens + 1
    trimmed = trim_turn(message, SHAPE)
    # 4,924 letters less the 3,938 kept: 493 cut from each block, 6,409 units, 101 tokens.
    omitted = tokens((2462 - END) * LETTER)
    assert omitted == 101
    assert trimmed.content == [
        text("a" * END + "\n" + omission_marker(omitted)),
        text(omission_marker(omitted) + "\n" + "b" * END),
    ]


def test_a_one_character_cut_is_marked_with_the_one_token_it_costs():
    body = "h" * END + "m" + "t" * END
    assert trim_text(body, TIGHT) == "h" * END + "\n… 1 tokens omitted …\n" + "t" * END


def test_blocks_ending_on_the_head_and_starting_on_the_tail_are_untouched():
    clock = Clock()
    # 1,968 letters and a line break: 25,600 units, the whole head (or tail).
    assert 1968 * LETTER + LINE_BREAK == 25_600
    head, middle, tail = text("h" * 1968 + "\n"), text("m"), text("\n" + "t" * 1968)
    trimmed = trim_turn(turn(clock, "user", head, middle, tail), TIGHT)
    # Only the one character between them is cut; no block is left empty.
    assert trimmed.content == [head, text("… 1 tokens omitted …"), tail]


def test_blocks_wholly_inside_the_head_or_the_tail_carry_no_marker():
    clock = Clock()
    # 1,968 letters and a line break are 25,600 units: the head's second block ends on its
    # last unit; the tail's first starts on it.
    head = [text("a" * 1000), text("b" * 968 + "\n")]
    tail = [text("\n" + "c" * 968), text("d" * 1000)]
    trimmed = trim_turn(turn(clock, "assistant", *head, text("m" * 2000), *tail), SHAPE)
    # Never a "… 0 tokens omitted …" on a block that lost nothing.
    assert trimmed.content == [*head, text(omission_marker(tokens(2000 * LETTER))), *tail]


def test_a_one_block_turn_is_trimmed_to_head_marker_and_tail_and_keeps_its_identity():
    clock = Clock()
    original = turn(clock, "user", text("H" * END + "M" * 6800 + "T" * END))
    trimmed = trim_turn(original, SHAPE)
    # 6,800 letters are 88,400 units: 1,381.25 tokens, 1,382 as the marker says.
    assert tokens(6800 * LETTER) == 1382
    assert trimmed.content == [text("H" * END + "\n… 1382 tokens omitted …\n" + "T" * END)]
    assert (trimmed.id, trimmed.role, trimmed.sent_at, trimmed.recorded_at) == (
        original.id,
        original.role,
        original.sent_at,
        original.recorded_at,
    )


def test_a_call_over_its_budget_only_by_its_id_name_and_keys_is_untouched_until_its_input_is_cut():
    clock = Clock()
    # An input whose JSON text head and tail hold whole: `{"b":"` (93 units) and 1,962
    # d's are the head's 25,599, 1,966 d's and `"}` (32) the tail's 25,590. Nothing to cut.
    head = (25_600 - 5 * 16 - LETTER) // LETTER
    tail = (25_600 - 2 * 16) // LETTER
    assert (head, tail) == (1962, 1966)
    within = tool_use("c", name="n", b="d" * (head + tail))
    message = turn(clock, "assistant", within)
    assert estimate_turn_tokens(message) > TIGHT.max_message_tokens
    assert trim_turn(message, TIGHT) is message
    # One character more, and that one character is cut and counted.
    over = tool_use("c", name="n", b="d" * (head + tail + 1))
    (block,) = trim_turn(turn(clock, "assistant", over), TIGHT).content
    input_text = '{"b":"' + "d" * (head + tail + 1) + '"}'
    assert block["toolUse"]["input"] == {
        TRIMMED_INPUT_KEY: input_text[: len('{"b":"') + head]
        + "\n… 1 tokens omitted …\n"
        + input_text[-(tail + len('"}')) :]
    }


def test_a_trimmed_message_may_exceed_its_budget_by_its_marker_line_and_no_more():
    """Decision: the marker is added to head and tail, not carved out of them.

    SPEC 2 gives `HISTORY_MESSAGE_MAX_TOKENS` as the size over which a message
    is trimmed, and fixes the trim's shape: head and tail of 400 tokens each,
    capped at half the setting, with the marker on its own line between them
    (SPEC 5.5.1). At a setting of 800 or a little above, that shape is over the
    setting by the marker line: 3,939 letters trimmed for 800 come out as
    805 tokens. Carving the marker out of head and tail would contradict the
    spec's figures, and could never hold for a setting below the marker's own
    size without a silent cut, which is forbidden. The window's budget is not
    affected: it counts each trimmed message as kept, marker included.
    """
    body = "x" * (2 * END + 1)
    trimmed = trim_text(body, TIGHT)
    marker_line = "\n" + omission_marker(1) + "\n"
    assert trimmed == "x" * END + marker_line + "x" * END
    # The kept letters, two line breaks, and the marker: two ellipses (15 units each), four
    # spaces, a digit (32) and thirteen letters.
    marker_line_units = 2 * LINE_BREAK + 2 * 15 + 4 * 1 + 32 + 13 * LETTER
    assert estimate_tokens(trimmed) == tokens(2 * END * LETTER + marker_line_units) == 805
    assert estimate_tokens(trimmed) > TIGHT.max_message_tokens
    # At the default setting even a marker of seven digits stays within the budget:
    # 4,923,076 letters cut are 63,999,988 units, a million tokens.
    huge = trim_text("x" * (2 * END + 4_923_076), SHAPE)
    assert tokens(4_923_076 * LETTER) == 1_000_000
    assert huge == "x" * END + "\n" + omission_marker(1_000_000) + "\n" + "x" * END
    assert estimate_content_tokens([text(huge)]) <= SHAPE.max_message_tokens


# Two paragraphs of 1,968 letters: 2 * 1,968 * 13 + 2 * 16 = 51,200 units, head and tail.
PARAGRAPHS = "x" * 1968 + "\n\n" + "x" * 1968


@pytest.mark.parametrize("body", ["x" * 100, PARAGRAPHS])
def test_a_text_no_longer_than_head_and_tail_together_is_never_cut(body: str) -> None:
    # A shape whose head and tail (400 tokens each, 51,200 units together) outgrow its
    # budget, as one built by hand may: cutting would keep every character anyway.
    shape = TrimShape(max_message_tokens=10, head_tokens=400, tail_tokens=400)
    assert 2 * 1968 * LETTER + 2 * LINE_BREAK == 51_200
    original = turn(Clock(), "user", text(body))
    assert trim_turn(original, shape) is original


def test_one_character_past_head_and_tail_is_cut() -> None:
    shape = TrimShape(max_message_tokens=10, head_tokens=400, tail_tokens=400)
    original = turn(Clock(), "user", text(PARAGRAPHS + "x"))
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
