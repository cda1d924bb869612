"""JSON read as the standard has it: each refusal, its message, and what is let through."""

from __future__ import annotations

import json

import pytest

from memory_core.strict_json import (
    DUPLICATE_KEY,
    NOT_JSON,
    NUMBER_TOO_LARGE,
    TOO_DEEP,
    is_duplicate_key,
    strict_loads,
)


def refusal(text: str) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as caught:
        strict_loads(text)
    return caught.value


def test_a_valid_document_reads_as_json_loads_reads_it() -> None:
    text = '{"a": 1, "b": [1.5, -2e3, true, null, "x"], "c": {"a": 0.25}}'
    assert strict_loads(text) == json.loads(text)
    assert strict_loads("1.5") == 1.5


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"a": 1, "a": 2}', "a"),
        # The key named is the one given twice, not the first key of the object.
        ('{"a": 1, "b": 2, "b": 3}', "b"),
        ('{"outer": {"x": 1, "y": 2, "y": 3}}', "y"),
    ],
)
def test_a_key_given_twice_is_refused_by_name(text: str, key: str) -> None:
    error = refusal(text)
    assert error.msg == f"{DUPLICATE_KEY} {key!r}"
    assert is_duplicate_key(error)
    assert error.pos == 0


def test_equal_keys_in_different_objects_are_not_duplicates() -> None:
    assert strict_loads('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(constant: str) -> None:
    error = refusal(f'{{"x": {constant}}}')
    assert (error.msg, error.pos) == (NOT_JSON, 0)
    assert not is_duplicate_key(error)


@pytest.mark.parametrize("numeral", ["1e400", "-1e400"])
def test_a_float_beyond_the_finite_is_refused(numeral: str) -> None:
    error = refusal(f"[{numeral}]")
    assert (error.msg, error.pos) == (NUMBER_TOO_LARGE, 0)


def test_an_integer_past_the_digit_limit_is_refused_with_a_json_error() -> None:
    error = refusal("1" * 5000)
    assert (error.msg, error.pos) == (NUMBER_TOO_LARGE, 0)


def test_nesting_past_the_parser_s_depth_is_refused_with_a_json_error() -> None:
    error = refusal("[" * 100_000 + "]" * 100_000)
    assert (error.msg, error.pos) == (TOO_DEEP, 0)


def test_a_syntax_error_stays_the_parser_s_own() -> None:
    error = refusal('{"a": }')
    assert error.msg == "Expecting value"
    assert error.pos == 6
