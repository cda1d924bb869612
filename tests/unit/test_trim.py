import json
from typing import Any

import pytest

from memory_core.tokens import content_units, estimate_content_tokens
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, omission_marker, trim_text, trim_turn
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn

SHAPE = TrimShape.for_budget(1000)
# The costs the expectations are written from (memory_core/tokens.py), in units, 64 a token.
LETTER, DIGIT, JSON_MARK = 13, 32, 16
# The most ASCII letters within 400 tokens: 1,969 of them are 25,597 units, 1,970 are 25,610.
END = 25_600 // LETTER


def tokens(units: int) -> int:
    """Units as the estimate counts them in tokens: rounded up."""
    return -(-units // 64)


def test_the_marker_is_exact_with_an_ellipsis_on_both_sides():
    assert omission_marker(1700) == "\u2026 1700 tokens omitted \u2026"


def test_a_long_message_keeps_its_head_and_tail_around_a_marker_on_its_own_line():
    body = "H" * END + "M" * 6800 + "T" * END
    trimmed = trim_text(body, SHAPE)
    # 6,800 letters are 88,400 units: 1,381.25 tokens, 1,382 as the marker says.
    assert tokens(6800 * LETTER) == 1382
    assert trimmed == "H" * END + "\n… 1382 tokens omitted …\n" + "T" * END


@pytest.mark.parametrize(
    ("length", "omitted"),
    # The shortest text over the budget (4,924 letters); a cut of a whole number of tokens
    # (6,784 letters, 1,378 tokens); cuts a quarter and nine tenths of a token over 1,381.
    [(4924, 201), (2 * END + 6784, 1378), (2 * END + 6800, 1382), (2 * END + 6803, 1382)],
)
def test_the_omitted_count_is_the_real_estimate_of_what_was_cut(length, omitted):
    trimmed = trim_text("z" * length, SHAPE)
    assert f"\n… {omitted} tokens omitted …\n" in trimmed
    # What is kept plus what the marker owns up to is the whole message.
    assert tokens((length - 2 * END) * LETTER) == omitted


def test_a_message_at_the_budget_is_untouched():
    # 4,923 letters and a space: 64,000 units, 1,000 tokens exactly.
    body = "q" * 4923 + " "
    assert 4923 * LETTER + 1 == 64_000
    assert trim_text(body, SHAPE) is body
    clock = Clock()
    at_budget = turn(clock, "user", text(body))
    assert trim_turn(at_budget, SHAPE) is at_budget


def test_one_character_over_the_budget_is_trimmed():
    clock = Clock()
    # A second space: 64,001 units, a unit over.
    over = turn(clock, "assistant", text("q" * 4923 + "  "))
    assert trim_turn(over, SHAPE) is not over


def test_head_and_tail_are_capped_at_half_the_per_message_budget():
    shape = TrimShape.for_budget(500)
    assert (shape.head_tokens, shape.tail_tokens) == (250, 250)
    # 250 tokens are 16,000 units: 1,230 letters (15,990), and not one more.
    end = 16_000 // LETTER
    trimmed = trim_text("a" * end + "b" * 4000 + "c" * end, shape)
    assert trimmed == "a" * 1230 + f"\n… {tokens(4000 * LETTER)} tokens omitted …\n" + "c" * 1230
    assert TrimShape.for_budget(1000).head_tokens == 400
    assert TrimShape.for_budget(5000).tail_tokens == 400


def test_text_split_over_blocks_is_trimmed_as_one_string_and_each_cut_is_marked():
    clock = Clock()
    message = turn(clock, "assistant", text("a" * 3000), text("b" * 3000))
    first, second = trim_turn(message, SHAPE).content
    # Each block gives up its 1,031 letters past the kept end: 13,403 units, 210 tokens.
    omitted = tokens((3000 - END) * LETTER)
    assert omitted == 210
    assert first["text"] == "a" * END + f"\n… {omitted} tokens omitted …"
    assert second["text"] == f"… {omitted} tokens omitted …\n" + "b" * END


def test_a_block_wholly_inside_the_cut_keeps_only_its_marker_and_never_goes_empty():
    clock = Clock()
    message = turn(clock, "user", text("a" * END), text("m" * 2000), text("c" * END))
    _, middle, _ = trim_turn(message, SHAPE).content
    assert middle == {"text": f"… {tokens(2000 * LETTER)} tokens omitted …"}


def test_a_long_tool_result_is_trimmed_and_keeps_its_tool_use_id():
    clock = Clock()
    message = turn(clock, "user", tool_result("call-1", "r" * 8000))
    (block,) = trim_turn(message, SHAPE).content
    assert block["toolResult"]["toolUseId"] == "call-1"
    (item,) = block["toolResult"]["content"]
    assert f"… {tokens((8000 - 2 * END) * LETTER)} tokens omitted …" in item["text"]


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
    # The head: `{"body":"` (five JSON marks and four letters) and 1,959 d's, 25,599 units;
    # the tail: 1,966 d's and `"}`, 25,590 units.
    head = (25_600 - 5 * JSON_MARK - 4 * LETTER) // LETTER
    tail = (25_600 - 2 * JSON_MARK) // LETTER
    assert (head, tail) == (1959, 1966)
    omitted = tokens((9000 - head - tail) * LETTER)
    assert block == {
        "toolUse": {
            "toolUseId": "call-3",
            "name": "draft",
            "input": {
                TRIMMED_INPUT_KEY: input_text[: len('{"body":"') + head]
                + f"\n… {omitted} tokens omitted …\n"
                + input_text[-(tail + len('"}')) :]
            },
        }
    }


def _call_costing(units: int) -> dict[str, Any]:
    """A tool call whose whole block, as JSON text, costs exactly `units`.

    Bare, `{"toolUse":{"toolUseId":"c","name":"n","input":{"b":""}}}` is 28 letters
    and 29 JSON marks; its input's value makes up the rest in d's and spaces.
    """
    rest = units - (28 * LETTER + 29 * JSON_MARK)
    return tool_use("c", name="n", b="d" * (rest // LETTER) + " " * (rest % LETTER))


def test_a_tool_call_exactly_at_the_budget_is_untouched_and_one_character_over_is_trimmed():
    clock = Clock()
    at_budget = turn(clock, "assistant", _call_costing(64_000))
    assert content_units(at_budget.content) == 64_000
    assert estimate_content_tokens(at_budget.content) == 1000
    assert trim_turn(at_budget, SHAPE) is at_budget
    over = turn(clock, "assistant", _call_costing(64_001))
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
    # Past the 13,000 units of the text before it, the head has 12,600 left: `{"q":"` (93)
    # and 962 q's; the tail's 12,600 hold 966 q's and `"}` (32).
    head = (12_600 - 5 * JSON_MARK - LETTER) // LETTER
    tail = (12_600 - 2 * JSON_MARK) // LETTER
    assert (head, tail) == (962, 966)
    kept = cut_call["toolUse"]["input"][TRIMMED_INPUT_KEY]
    omitted = tokens((9000 - head - tail) * LETTER)
    assert kept == '{"q":"' + "q" * head + f"\n… {omitted} tokens omitted …\n" + "q" * tail + '"}'
    assert cut_call["toolUse"]["toolUseId"] == "c1"
    assert cut_call["toolUse"]["name"] == "search"


def test_parallel_calls_each_under_the_budget_are_trimmed_when_together_over_it():
    clock = Clock()
    calls = [tool_use(f"c{n}", q=str(n) * 750) for n in range(4)]
    message = turn(clock, "assistant", *calls)
    assert all(estimate_content_tokens([call]) < 1000 for call in calls)
    assert estimate_content_tokens(message.content) > 1000
    trimmed = trim_turn(message, SHAPE)
    assert estimate_content_tokens(trimmed.content) < estimate_content_tokens(message.content)
    assert [b["toolUse"]["toolUseId"] for b in trimmed.content] == ["c0", "c1", "c2", "c3"]
    # Each input, `{"q":"`, 750 digits and `"}`, costs 24,125 units: the first lies within
    # the head's 25,600, the last within the tail's; the two between keep only what the
    # 1,475 units left buy: 43 digits after `{"q":"`, 45 before `"}`.
    whole = 5 * JSON_MARK + LETTER + 750 * DIGIT + 2 * JSON_MARK
    head = (25_600 - whole - 5 * JSON_MARK - LETTER) // DIGIT
    tail = (25_600 - whole - 2 * JSON_MARK) // DIGIT
    assert (whole, head, tail) == (24_125, 43, 45)
    # What each gives up: 707 digits and `"}`, 22,656 units; `{"q":"` and 705 digits, 22,653.
    second_cut = tokens((750 - head) * DIGIT + 2 * JSON_MARK)
    third_cut = tokens(5 * JSON_MARK + LETTER + (750 - tail) * DIGIT)
    assert (second_cut, third_cut) == (354, 354)
    first, second, third, last = trimmed.content
    assert (first, last) == (calls[0], calls[3])
    assert second["toolUse"]["input"] == {
        TRIMMED_INPUT_KEY: '{"q":"' + "1" * head + f"\n… {second_cut} tokens omitted …"
    }
    assert third["toolUse"]["input"] == {
        TRIMMED_INPUT_KEY: f"… {third_cut} tokens omitted …\n" + "2" * tail + '"}'
    }


def test_a_trimmed_tool_input_stays_a_json_object_converse_accepts():
    clock = Clock()
    call = tool_use("functions.get_weather:0", name="get_weather", city="条" * 5000)
    (block,) = trim_turn(turn(clock, "assistant", call), SHAPE).content
    tool_input = block["toolUse"]["input"]
    assert isinstance(tool_input, dict)
    assert json.loads(json.dumps(tool_input)) == tool_input
