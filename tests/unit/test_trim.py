import pytest

from memory_core.tokens import estimate_content_tokens
from memory_core.trim import TrimShape, omission_marker, trim_text, trim_turn
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn

SHAPE = TrimShape.for_budget(1000)


def test_the_marker_is_exact_with_an_ellipsis_on_both_sides():
    assert omission_marker(1700) == "\u2026 1700 tokens omitted \u2026"


def test_a_long_message_keeps_its_head_and_tail_around_a_marker_on_its_own_line():
    body = "H" * 1600 + "M" * 6800 + "T" * 1600
    trimmed = trim_text(body, SHAPE)
    assert trimmed == "H" * 1600 + "\n… 1700 tokens omitted …\n" + "T" * 1600


@pytest.mark.parametrize(("length", "omitted"), [(4001, 201), (10_001, 1701), (10_003, 1701)])
def test_the_omitted_count_is_the_real_estimate_of_what_was_cut(length, omitted):
    trimmed = trim_text("z" * length, SHAPE)
    assert f"\n… {omitted} tokens omitted …\n" in trimmed
    # What is kept plus what the marker owns up to is the whole message.
    assert (length - 3200 + 3) // 4 == omitted


def test_a_message_at_the_budget_is_untouched():
    body = "q" * 4000
    assert trim_text(body, SHAPE) is body
    clock = Clock()
    at_budget = turn(clock, "user", text(body))
    assert trim_turn(at_budget, SHAPE) is at_budget


def test_one_character_over_the_budget_is_trimmed():
    clock = Clock()
    over = turn(clock, "assistant", text("q" * 4001))
    assert trim_turn(over, SHAPE) is not over


def test_head_and_tail_are_capped_at_half_the_per_message_budget():
    shape = TrimShape.for_budget(500)
    assert (shape.head_tokens, shape.tail_tokens) == (250, 250)
    trimmed = trim_text("a" * 1000 + "b" * 4000 + "c" * 1000, shape)
    assert trimmed == "a" * 1000 + "\n… 1000 tokens omitted …\n" + "c" * 1000
    assert TrimShape.for_budget(1000).head_tokens == 400
    assert TrimShape.for_budget(5000).tail_tokens == 400


def test_text_split_over_blocks_is_trimmed_as_one_string_and_each_cut_is_marked():
    clock = Clock()
    message = turn(clock, "assistant", text("a" * 3000), text("b" * 3000))
    first, second = trim_turn(message, SHAPE).content
    assert first["text"] == "a" * 1600 + "\n… 350 tokens omitted …"
    assert second["text"] == "… 350 tokens omitted …\n" + "b" * 1600


def test_a_block_wholly_inside_the_cut_keeps_only_its_marker_and_never_goes_empty():
    clock = Clock()
    message = turn(clock, "user", text("a" * 1600), text("m" * 2000), text("c" * 1600))
    _, middle, _ = trim_turn(message, SHAPE).content
    assert middle == {"text": "… 500 tokens omitted …"}


def test_a_long_tool_result_is_trimmed_and_keeps_its_tool_use_id():
    clock = Clock()
    message = turn(clock, "user", tool_result("call-1", "r" * 8000))
    (block,) = trim_turn(message, SHAPE).content
    assert block["toolResult"]["toolUseId"] == "call-1"
    (item,) = block["toolResult"]["content"]
    assert "… 1200 tokens omitted …" in item["text"]


def test_a_cut_json_result_travels_as_text():
    clock = Clock()
    document = {"clauses": ["c" * 9000]}
    result = {"toolResult": {"toolUseId": "call-2", "content": [{"json": document}]}}
    (block,) = trim_turn(turn(clock, "user", result), SHAPE).content
    (item,) = block["toolResult"]["content"]
    assert set(item) == {"text"}
    assert item["text"].startswith('{"clauses":["ccc')
    assert "tokens omitted" in item["text"]


def test_a_tool_call_input_is_never_cut():
    clock = Clock()
    call = tool_use("call-3", name="draft", body="d" * 9000)
    message = turn(clock, "assistant", call, text("e" * 200))
    assert estimate_content_tokens(message.content) > 1000
    trimmed = trim_turn(message, SHAPE)
    assert trimmed.content[0] == call
    assert trimmed.content[1]["text"] == "e" * 200
