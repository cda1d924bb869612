import json

import pytest

from memory_core.tokens import (
    block_chars,
    estimate_content_tokens,
    estimate_tokens,
    estimate_turn_tokens,
)
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn


@pytest.mark.parametrize(
    ("body", "tokens"),
    [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 4000, 1000), ("x" * 4001, 1001)],
)
def test_the_estimate_is_the_ceiling_of_characters_over_four(body, tokens):
    assert estimate_tokens(body) == tokens


def test_a_character_costs_by_its_script_not_by_its_bytes():
    # é and ж are two bytes each in UTF-8, 😀 four: Latin-1 letters cost half a token,
    # Cyrillic ones 33/64, an emoji two tokens (memory_core/tokens.py).
    assert estimate_tokens("é" * 4) == 2
    assert estimate_tokens("ж" * 64) == 33
    assert estimate_tokens("😀" * 8) == 16


def test_a_message_is_estimated_over_all_its_text_at_once():
    # Two blocks of 2 characters are 4 characters: one token, not two.
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
    # 条 is a token; as a \uXXXX escape it would be six ASCII characters, a token and a half.
    result = tool_result("t1", "条" * 400)
    overhead = len('{"toolResult":{"toolUseId":"t1","content":[{"text":""}]}}')
    assert estimate_content_tokens([result]) == 400 + estimate_tokens("x" * overhead)


def test_text_and_tool_blocks_of_one_message_are_estimated_together():
    call = tool_use("t1", q="x")
    together = estimate_content_tokens([text("ab"), call])
    assert together == estimate_tokens("ab" + json.dumps(call, separators=(",", ":")))


def test_an_image_carries_no_text_and_counts_nothing():
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
    assert estimate_content_tokens([image, text("abcd")]) == 1


def test_a_turn_is_estimated_from_its_content():
    clock = Clock()
    assert estimate_turn_tokens(turn(clock, "user", text("x" * 41))) == 11


def test_a_block_without_text_costs_nothing_beside_the_text() -> None:
    # Converse's images and documents carry no text the estimate can count.
    image = {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}
    assert block_chars(image) == 0
    # Five characters are two tokens with the image or without it.
    assert estimate_content_tokens([{"text": "abcde"}, image]) == 2
