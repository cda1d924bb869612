"""The test helper that stands in for Bedrock: it must refuse what Bedrock refuses."""

import re
from typing import Any

import pytest

from converse_history.api_models import TOOL_NAME_PATTERN, TOOL_USE_ID_PATTERN
from tests.support.converse_validator import converse_input_shape, converse_problems
from tests.unit.conversation_builders import text, tool_result, tool_use


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


VALID = [
    user(text("q")),
    assistant(text("checking"), tool_use("functions.get_weather:0", city="Porto")),
    user(tool_result("functions.get_weather:0", "18 °C"), text("and?")),
]


def test_a_valid_fragment_has_no_problem():
    system = [{"text": "memory"}, {"cachePoint": {"type": "default"}}]
    assert converse_problems({"system": system, "messages": VALID}) == []


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([assistant(text("hi")), user(text("q"))], "start with a user message"),
        ([user(text("q")), assistant(text("a"))], "end with a user message"),
        ([user(text("q")), user(text("r"))], "roles must alternate"),
        ([user(text("  "))], "blank text"),
        ([user(text("q")), assistant(tool_use("t1", q=1)), user(text("hi"))], "not answered"),
        ([user(tool_result("t1", "r"), text("q"))], "answers no toolUse"),
        (
            [
                user(text("q")),
                assistant(tool_use("t1", q=1)),
                user(text("a"), tool_result("t1", "r")),
            ],
            "after other content",
        ),
        (
            [
                user(text("q")),
                assistant(tool_use("t1", q=1), tool_use("t1", q=2)),
                user(tool_result("t1", "r")),
            ],
            "ids repeat",
        ),
        ([user({"text": 5})], "Invalid type"),
        ([user({"image": {}})], "Missing required parameter"),
        ([{"role": "robot", "content": [text("q")]}], "is not one of"),
        (
            [user(text("q")), assistant(tool_use("t 1", q=1)), user(tool_result("t 1", "r"))],
            "does not match",
        ),
        (
            [user(text("q")), assistant(tool_use("t" * 65, q=1)), user(tool_result("t" * 65, "r"))],
            "at most 64",
        ),
    ],
)
def test_each_of_bedrocks_refusals_is_found(messages, problem):
    problems = converse_problems({"messages": messages})
    assert any(problem in found for found in problems), problems


def test_more_than_four_cache_points_are_refused():
    point = {"cachePoint": {"type": "default"}}
    system = [{"text": "memory"}, point, point, point]
    assert converse_problems({"system": system, "messages": [user(text("q"), point)]}) == []
    problems = converse_problems({"system": [*system, point], "messages": [user(text("q"), point)]})
    assert any("5 cache points" in p for p in problems)


def _metadata(member: str) -> dict[str, Any]:
    """The model's constraints on a member of a message's `toolUse` block."""
    messages = converse_input_shape().members["messages"]
    content = messages.member.members["content"]
    tool_use = content.member.members["toolUse"]
    return dict(tool_use.members[member].metadata)


@pytest.mark.parametrize(
    ("member", "ours"), [("toolUseId", TOOL_USE_ID_PATTERN), ("name", TOOL_NAME_PATTERN)]
)
def test_our_tool_patterns_are_bedrocks_own(member, ours):
    model = _metadata(member)
    assert ours == f"^{model['pattern'].removesuffix('+')}{{{model['min']},{model['max']}}}$"
    for sample in ("call:abc", "functions.get_weather:0", "tooluse_X1", "a-b_c", "x" * 64):
        bedrock_takes = bool(re.fullmatch(model["pattern"], sample)) and len(sample) <= 64
        assert bool(re.match(ours, sample)) == bedrock_takes
