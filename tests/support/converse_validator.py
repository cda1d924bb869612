"""Is a Converse fragment one Bedrock would accept? botocore's own model, plus Bedrock's rules.

The shape check is botocore's validator on the bedrock-runtime `Converse`
input shape, with no network: it follows the SDK, so it cannot drift from
it. botocore checks types, required members, unions and minimum lengths but
not maximum lengths or patterns, so those are read from the same model and
checked here. The rules the schema cannot state are the ones Bedrock
answers with a ValidationException: the first message is `user`, roles
alternate, the last message is `user`, no text is blank, every `toolUse` is
answered by a `toolResult` of its id in the very next message, no
`toolResult` answers a call the message before did not make, tool results
come before any text in their message (Claude), ids are unique within a
message, and there are at most 4 cache points, their TTLs never increasing
from `system` to `messages` (a 1-hour point after a 5-minute one is refused).

A cache point (`{"cachePoint": {"type": "default", "ttl"?}}`) is taken where
Bedrock takes one: in `system` and in a message's content, after the blocks
whose prefix it marks. Conservatively, a cache point with nothing before it in
its list (first in `system` or in a message) is refused, and in a user message
it counts as content, so no tool result may follow it.
"""

from __future__ import annotations

import itertools
import re
from functools import cache
from typing import Any

import botocore.session
from botocore.exceptions import ParamValidationError
from botocore.model import Shape
from botocore.validate import validate_parameters

MAX_CACHE_POINTS = 4
# Bedrock's cache TTLs, longest first; a point without `ttl` is of the default, 5 minutes.
CACHE_TTLS = ("1h", "5m")


@cache
def converse_input_shape() -> Shape:
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return model.operation_model("Converse").input_shape


def converse_problems(fragment: dict[str, Any]) -> list[str]:
    """Every reason Bedrock Converse would refuse `fragment` ({"system"?, "messages"}), or []."""
    params = {"modelId": "anthropic.claude-sonnet-4-5", **fragment}
    problems: list[str] = []
    try:
        validate_parameters(params, converse_input_shape())
    except ParamValidationError as error:
        problems.append(str(error))
    problems += _limits_of_the_model(params, converse_input_shape(), "")
    problems += _conversation_rules(fragment.get("messages", []))
    problems += _cache_points(fragment)
    return problems


def assert_valid_for_converse(fragment: dict[str, Any]) -> None:
    problems = converse_problems(fragment)
    assert not problems, "\n".join(problems)


def _limits_of_the_model(value: Any, shape: Shape, where: str) -> list[str]:
    """Maximum lengths and patterns, which botocore's validator leaves to the service."""
    problems: list[str] = []
    if shape.type_name == "structure" and isinstance(value, dict):
        if shape.metadata.get("document"):
            return []
        for name, member in shape.members.items():
            if name in value:
                problems += _limits_of_the_model(value[name], member, f"{where}.{name}")
    elif shape.type_name == "list" and isinstance(value, list):
        if "max" in shape.metadata and len(value) > shape.metadata["max"]:
            problems.append(f"{where}: {len(value)} items, at most {shape.metadata['max']}")
        for index, item in enumerate(value):
            problems += _limits_of_the_model(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "string" and isinstance(value, str):
        if shape.enum and value not in shape.enum:
            problems.append(f"{where}: {value!r} is not one of {shape.enum}")
        maximum = shape.metadata.get("max")
        if maximum is not None and len(value) > maximum:
            problems.append(f"{where}: {len(value)} characters, at most {maximum}")
        pattern = shape.metadata.get("pattern")
        if pattern and not re.fullmatch(pattern, value):
            problems.append(f"{where}: {value!r} does not match {pattern}")
    return problems


def _conversation_rules(messages: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    roles = [message.get("role") for message in messages]
    if not messages:
        return ["messages: none"]
    if roles[0] != "user":
        problems.append("messages[0]: the conversation must start with a user message")
    if roles[-1] != "user":
        problems.append("the conversation must end with a user message")
    for index in range(1, len(roles)):
        if roles[index] == roles[index - 1]:
            problems.append(f"messages[{index}]: roles must alternate")
    for index, message in enumerate(messages):
        content = message.get("content", [])
        if not content:
            problems.append(f"messages[{index}]: no content")
        problems += _blocks_rules(index, content)
        calls = _ids(content, "toolUse")
        answers = (
            _ids(messages[index + 1].get("content", []), "toolResult")
            if (index + 1 < len(messages))
            else []
        )
        for tool_use_id in calls:
            if tool_use_id not in answers:
                problems.append(
                    f"messages[{index}]: toolUse {tool_use_id!r} is not answered by a "
                    "toolResult in the next message"
                )
        asked = _ids(messages[index - 1].get("content", []), "toolUse") if index else []
        for tool_use_id in _ids(content, "toolResult"):
            if message.get("role") != "user" or tool_use_id not in asked:
                problems.append(
                    f"messages[{index}]: toolResult {tool_use_id!r} answers no toolUse of "
                    "the previous message"
                )
    return problems


def _blocks_rules(index: int, content: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    seen_other = False
    for position, block in enumerate(content):
        if isinstance(block.get("text"), str) and not block["text"].strip():
            problems.append(f"messages[{index}].content[{position}]: blank text")
        if "toolResult" in block:
            if seen_other:
                problems.append(
                    f"messages[{index}].content[{position}]: a toolResult after other content"
                )
            for item in block["toolResult"].get("content", []):
                if isinstance(item.get("text"), str) and not item["text"].strip():
                    problems.append(f"messages[{index}].content[{position}]: blank result text")
        else:
            seen_other = True
    for kind in ("toolUse", "toolResult"):
        ids = _ids(content, kind)
        if len(ids) != len(set(ids)):
            problems.append(f"messages[{index}]: {kind} ids repeat: {ids}")
    return problems


def _ids(content: list[dict[str, Any]], kind: str) -> list[str]:
    return [block[kind]["toolUseId"] for block in content if kind in block]


def _cache_points(fragment: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    lists = [("system", fragment.get("system", []))]
    lists += [
        (f"messages[{index}].content", message.get("content", []))
        for index, message in enumerate(fragment.get("messages", []))
    ]
    ttls: list[tuple[str, str]] = []
    for where, blocks in lists:
        for position, block in enumerate(blocks):
            if not isinstance(block, dict) or "cachePoint" not in block:
                continue
            if position == 0:
                problems.append(f"{where}[0]: a cache point with nothing before it")
            point = block["cachePoint"]
            ttl = point.get("ttl", "5m") if isinstance(point, dict) else "5m"
            ttls.append((f"{where}[{position}]", ttl))
    if len(ttls) > MAX_CACHE_POINTS:
        problems.append(f"{len(ttls)} cache points, at most {MAX_CACHE_POINTS}")
    for (_, before), (where, ttl) in itertools.pairwise(ttls):
        # An unknown TTL is botocore's to refuse; the order is Bedrock's.
        known = ttl in CACHE_TTLS and before in CACHE_TTLS
        if known and CACHE_TTLS.index(ttl) < CACHE_TTLS.index(before):
            problems.append(
                f"{where}: a cache point of TTL {ttl} after one of {before} "
                "(TTLs must not increase)"
            )
    return problems
