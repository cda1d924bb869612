import json

import pytest

from memory_core.tokens import (
    block_units,
    estimate_content_tokens,
    estimate_tokens,
    estimate_turn_tokens,
)
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        ("", 0),
        ("a", 1),  # 13 units
        ("abcd", 1),  # 4 x 13 = 52 units, within one token
        ("abcde", 2),  # 5 x 13 = 65 units, one over
        ("x" * 64, 13),  # 64 x 13 = 832 units, 13 tokens exactly
        ("x" * 65, 14),  # 845 units, one letter over
        ("x" * 4096, 4096 * 13 // 64),  # 832 tokens exactly
        ("x" * 4097, 4096 * 13 // 64 + 1),
    ],
)
def test_the_estimate_of_letters_is_the_ceiling_of_13_units_each_over_64(body, tokens):
    assert estimate_tokens(body) == tokens


def test_a_character_costs_by_its_script_not_by_its_bytes():
    # é and ж are two bytes each in UTF-8, 😀 four; 64 of each cost 64 times a character's
    # units, that many tokens: é 153 (the European word it stands for), ж 34, 😀 133.
    assert estimate_tokens("é" * 64) == 153
    assert estimate_tokens("ж" * 64) == 34
    assert estimate_tokens("😀" * 64) == 133
    # One more is over the boundary.
    assert estimate_tokens("ж" * 65) == 35


def test_a_message_is_estimated_over_all_its_text_at_once():
    # Two blocks of two letters are 4 x 13 = 52 units: one token, not two.
    assert estimate_content_tokens([text("ab"), text("cd")]) == 1


def test_a_tool_block_is_estimated_as_its_json_text():
    call = tool_use("t1", name="search", query="clause 7")
    call_json = '{"toolUse":{"toolUseId":"t1","name":"search","input":{"query":"clause 7"}}}'
    assert estimate_content_tokens([call]) == estimate_tokens(call_json)
    result = tool_result("t1", "y" * 40)
    result_json = '{"toolResult":{"toolUseId":"t1","content":[{"text":"' + "y" * 40 + '"}]}}'
    assert estimate_content_tokens([result]) == estimate_tokens(result_json)
    as_json = {"toolResult": {"toolUseId": "t1", "content": [{"json": {"a": 1}}]}}
    assert estimate_content_tokens([as_json]) == estimate_tokens(
        '{"toolResult":{"toolUseId":"t1","content":[{"json":{"a":1}}]}}'
    )


def test_a_tool_block_counts_non_latin_text_by_its_characters_not_escapes():
    # 条 costs 65 units; as a \uXXXX escape it would cost 64 + 13 + 4 x 32 = 205.
    result = tool_result("t1", "条" * 400)
    # The JSON around it: 31 letters, the digit of "t1" and 25 of `"{}[]:,`.
    overhead = 31 * 13 + 32 + 25 * 16
    assert estimate_content_tokens([result]) == -(-(400 * 65 + overhead) // 64)  # 420


def test_text_and_tool_blocks_of_one_message_are_estimated_together():
    call = tool_use("t1", q="x")
    together = estimate_content_tokens([text("ab"), call])
    assert together == estimate_tokens("ab" + json.dumps(call, separators=(",", ":")))


def test_an_image_carries_no_text_and_counts_nothing():
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
    assert estimate_content_tokens([image, text("abcd")]) == 1


def test_a_turn_is_estimated_from_its_content():
    clock = Clock()
    # 41 letters: 41 x 13 = 533 units, 8 tokens (512) and 21 units more.
    assert estimate_turn_tokens(turn(clock, "user", text("x" * 41))) == 9


def test_a_block_without_text_costs_nothing_beside_the_text() -> None:
    # Converse's images and documents carry no text the estimate can count.
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
    assert block_units(image) == 0
    # Five letters (65 units) are two tokens with the image or without it.
    assert estimate_content_tokens([{"text": "abcde"}, image]) == 2
