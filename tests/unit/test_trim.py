import json
from typing import Any

import pytest

from memory_core.tokens import estimate_content_tokens
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, omission_marker, trim_text, trim_turn
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


def test_a_long_tool_input_keeps_its_id_and_name_and_becomes_head_marker_tail():
    clock = Clock()
    call = tool_use("call-3", name="draft", body="d" * 9000)
    (block,) = trim_turn(turn(clock, "assistant", call), SHAPE).content
    input_text = json.dumps(call["toolUse"]["input"], separators=(",", ":"))
    omitted = len(input_text) - 3200
    assert block == {
        "toolUse": {
            "toolUseId": "call-3",
            "name": "draft",
            "input": {
                TRIMMED_INPUT_KEY: input_text[:1600]
                + f"\n… {-(-omitted // 4)} tokens omitted …\n"
                + input_text[-1600:]
            },
        }
    }


def _call_of_json_length(length: int) -> dict[str, Any]:
    """A tool call whose whole block, as JSON text, is exactly `length` characters."""
    bare = {"toolUse": {"toolUseId": "c", "name": "n", "input": {"b": ""}}}
    filler = length - len(json.dumps(bare, separators=(",", ":")))
    return tool_use("c", name="n", b="d" * filler)


def test_a_tool_call_exactly_at_the_budget_is_untouched_and_one_character_over_is_trimmed():
    clock = Clock()
    at_budget = turn(clock, "assistant", _call_of_json_length(4000))
    assert estimate_content_tokens(at_budget.content) == 1000
    assert trim_turn(at_budget, SHAPE) is at_budget
    over = turn(clock, "assistant", _call_of_json_length(4001))
    (block,) = trim_turn(over, SHAPE).content
    assert set(block["toolUse"]["input"]) == {TRIMMED_INPUT_KEY}
    assert "tokens omitted" in block["toolUse"]["input"][TRIMMED_INPUT_KEY]


def test_text_around_a_tool_call_and_its_input_are_cut_as_one_string():
    clock = Clock()
    call = tool_use("c1", name="search", q="q" * 9000)
    message = turn(clock, "assistant", text("a" * 1000), call, text("z" * 1000))
    before, cut_call, after = trim_turn(message, SHAPE).content
    assert before == text("a" * 1000)  # inside the head
    assert after == text("z" * 1000)  # inside the tail
    kept = cut_call["toolUse"]["input"][TRIMMED_INPUT_KEY]
    assert kept.startswith('{"q":"' + "q" * 594)
    assert kept.endswith("q" * 598 + '"}')
    assert cut_call["toolUse"]["toolUseId"] == "c1"
    assert cut_call["toolUse"]["name"] == "search"


def test_parallel_calls_each_under_the_budget_are_trimmed_when_together_over_it():
    clock = Clock()
    calls = [tool_use(f"c{n}", q=str(n) * 1500) for n in range(4)]
    message = turn(clock, "assistant", *calls)
    assert estimate_content_tokens(message.content) > 1000
    trimmed = trim_turn(message, SHAPE)
    assert estimate_content_tokens(trimmed.content) < estimate_content_tokens(message.content)
    assert [b["toolUse"]["toolUseId"] for b in trimmed.content] == ["c0", "c1", "c2", "c3"]
    # Each input is 1,508 characters of JSON: the first lies within the head's 1,600,
    # the last within the tail's; the two between give up all but their outer 92.
    first, second, third, last = trimmed.content
    assert (first, last) == (calls[0], calls[3])
    assert second["toolUse"]["input"] == {
        TRIMMED_INPUT_KEY: '{"q":"' + "1" * 86 + "\n… 354 tokens omitted …"
    }
    assert third["toolUse"]["input"] == {
        TRIMMED_INPUT_KEY: "… 354 tokens omitted …\n" + "2" * 90 + '"}'
    }


def test_a_trimmed_tool_input_stays_a_json_object_converse_accepts():
    clock = Clock()
    call = tool_use("functions.get_weather:0", name="get_weather", city="条" * 5000)
    (block,) = trim_turn(turn(clock, "assistant", call), SHAPE).content
    tool_input = block["toolUse"]["input"]
    assert isinstance(tool_input, dict)
    assert json.loads(json.dumps(tool_input)) == tool_input
