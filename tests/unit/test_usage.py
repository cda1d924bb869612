"""What the model reported for one reply, kept as reported."""

from __future__ import annotations

import struct

import pytest

from memory_core.usage import CONVERSE_NAMES, MAX_TOKENS, TokenUsage


def test_absent_cache_figures_count_0_and_reported_ones_count_as_reported() -> None:
    plain = TokenUsage(input_tokens=10, output_tokens=5)
    assert (plain.cache_read, plain.cache_write) == (0, 0)
    cached = TokenUsage(10, 5, 15, cache_read_input_tokens=7, cache_write_input_tokens=3)
    assert (cached.cache_read, cached.cache_write) == (7, 3)


def test_only_the_reported_fields_are_written_by_converse_s_names() -> None:
    assert TokenUsage(10, 5).as_json() == {"inputTokens": 10, "outputTokens": 5}
    every = TokenUsage(10, 5, 15, 7, 0)
    assert every.as_json() == {
        "inputTokens": 10,
        "outputTokens": 5,
        "totalTokens": 15,
        "cacheReadInputTokens": 7,
        # A reported 0 is kept: it says the cache was used and wrote nothing.
        "cacheWriteInputTokens": 0,
    }
    assert tuple(every.as_json()) == CONVERSE_NAMES


def test_read_back_what_was_written_and_nulls_as_absent() -> None:
    usage = TokenUsage(10, 5, 15, cache_write_input_tokens=MAX_TOKENS)
    assert TokenUsage.from_json(usage.as_json()) == usage
    read = TokenUsage.from_json(
        {"inputTokens": 3, "outputTokens": 4, "totalTokens": None, "cacheReadInputTokens": 2}
    )
    assert read == TokenUsage(3, 4, None, 2, None)
    # Numbers stored as DynamoDB numbers come back as decimals: read as integers.
    assert TokenUsage.from_json({"inputTokens": 3.0, "outputTokens": 4}).input_tokens == 3
    assert isinstance(
        TokenUsage.from_json({"inputTokens": 3.0, "outputTokens": 4}).input_tokens, int
    )


def test_the_largest_count_is_the_largest_32_bit_integer_bedrock_reports() -> None:
    struct.pack("<i", MAX_TOKENS)
    with pytest.raises(struct.error):
        struct.pack("<i", MAX_TOKENS + 1)
