"""SPEC 5, prompt caching: cache points after the memory and after the history, where they pay.

For `sliding` (the default) and `stable`: one after the memory in `system`
(when there is a memory), one after the history, before the current
message's first block (when there is a history); none at all for `off`. One
TTL for both, so TTLs never increase from `system` to `messages`. Every
fragment stays valid for Converse (botocore's model and Bedrock's rules,
`tests/support/converse_validator.py`), however the current message merges
into the history and however the tool blocks are repaired.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters
from hypothesis import given
from hypothesis import strategies as st

from memory_core.converse_shape import (
    CACHE_POINT,
    NO_CACHE_POINTS,
    CachePoints,
    ConverseFragment,
    converse_fragment,
)
from memory_core.repairs import NO_RESULT_RECORDED
from memory_core.workflow_input import model_input, omitted_for_size_marker
from tests.support.bedrock_stand_in import converse_names
from tests.support.converse_validator import (
    MAX_CACHE_POINTS,
    assert_valid_for_converse,
    converse_problems,
)
from tests.support.tool_conversations import (
    as_turns,
    contact_messages,
    pending_calls,
    tool_conversations,
)
from tests.unit.conversation_builders import (
    EVERY_CACHE_POINTS,
    T0,
    text,
    tool_result,
    tool_use,
)
from tests.unit.test_window_properties import PROPERTY, limits, run

MEMORY = "Counsel asked about clause 7 on 2 November."
SLIDING = CachePoints.of("sliding", "5m")
HOUR = CachePoints.of("sliding", "1h")
PLACING = [SLIDING, CachePoints.of("stable", "5m"), HOUR, CachePoints.of("stable", "1h")]
OFF = CachePoints.of("off", "5m")


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def point(cache: CachePoints) -> dict[str, Any]:
    return cache.block()


def fragment(
    history: list[dict[str, Any]],
    current: dict[str, Any],
    cache: CachePoints,
    memory: str | None = None,
) -> ConverseFragment:
    built = converse_fragment(history, current, memory, cache)
    assert_valid_for_converse(built.as_json())
    return built


def cache_points_of(value: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = [*value.get("system", [])]
    for message in value.get("messages", []):
        blocks += message["content"]
    return [block["cachePoint"] for block in blocks if "cachePoint" in block]


def without_cache_points(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "system": [block for block in value["system"] if "cachePoint" not in block],
        "messages": [
            {**message, "content": [b for b in message["content"] if "cachePoint" not in b]}
            for message in value["messages"]
        ],
    }


QUESTION = user(text("Is clause 8 binding?"))
ANSWER = assistant(text("Yes, from signature."))
NOW = user(text("And clause 9?"))


# -- the rules, as cache points ------------------------------------------------------------


def test_off_places_none_and_sliding_and_stable_place_them_with_the_tenants_ttl():
    assert CachePoints.of("off", "5m") == CachePoints.of("off", "1h") == NO_CACHE_POINTS
    assert not NO_CACHE_POINTS.placed
    for ttl in ("5m", "1h"):
        assert CachePoints.of("sliding", ttl) == CachePoints(placed=True, ttl=ttl)
        # Until the stable window exists, a stable tenant is served as a sliding one.
        assert CachePoints.of("stable", ttl) == CachePoints.of("sliding", ttl)


def test_the_5_minute_point_is_the_default_one_without_ttl_and_the_hour_one_names_its_ttl():
    assert SLIDING.block() == CACHE_POINT == {"cachePoint": {"type": "default"}}
    assert HOUR.block() == {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert SLIDING.block() is not SLIDING.block()  # never one dict shared by two places


def test_both_blocks_are_botocores_cache_point_block():
    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    shape = model.shape_for("CachePointBlock")
    assert set(shape.members) == {"type", "ttl"}
    assert shape.members["type"].enum == ["default"]
    assert shape.members["ttl"].enum == ["5m", "1h"]
    for cache in (SLIDING, HOUR):
        validate_parameters(cache.block()["cachePoint"], shape)


# -- each boundary, each policy --------------------------------------------------------------


@pytest.mark.parametrize("cache", EVERY_CACHE_POINTS, ids=repr)
def test_no_memory_and_no_history_is_no_cache_point(cache):
    built = fragment([], NOW, cache)
    assert built.as_json() == {"system": [], "messages": [NOW]}


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_memory_without_history_gets_its_point_in_system_and_none_in_messages(cache):
    built = fragment([], NOW, cache, MEMORY)
    assert built.system[1:] == [point(cache)]
    assert built.system[0]["text"].endswith(MEMORY)
    assert built.messages == [NOW]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_history_without_memory_gets_its_point_at_its_end_and_none_in_system(cache):
    built = fragment([QUESTION, ANSWER], NOW, cache)
    assert built.system == []
    assert built.messages == [QUESTION, assistant(*ANSWER["content"], point(cache)), NOW]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_memory_and_history_get_one_point_each(cache):
    built = fragment([QUESTION, ANSWER], NOW, cache, MEMORY)
    assert built.system[1] == point(cache)
    assert built.messages[1]["content"][-1] == point(cache)
    assert len(cache_points_of(built.as_json())) == 2


def test_off_places_no_cache_point_anywhere_whatever_the_fragment_holds():
    built = fragment([QUESTION, ANSWER], NOW, OFF, MEMORY)
    assert "cachePoint" not in json.dumps(built.as_json())
    assert built.system == [{"text": built.system[0]["text"]}]
    assert built.system[0]["text"].endswith(MEMORY)
    assert built.messages == [QUESTION, ANSWER, NOW]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_current_message_merged_into_an_unanswered_question_gets_the_point_between(cache):
    hello = user(text("hello?"))
    built = fragment([QUESTION, ANSWER, hello], NOW, cache)
    assert built.messages[-1]["content"] == [
        text("hello?"),
        point(cache),
        text("And clause 9?"),
    ]
    assert ANSWER["content"][-1] == built.messages[1]["content"][-1]  # no point before


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_history_ending_on_tool_results_gets_the_point_after_them(cache):
    history = [
        QUESTION,
        assistant(text("Looking."), tool_use("t1", clause=8)),
        user(tool_result("t1", "binding from signature")),
    ]
    built = fragment(history, NOW, cache)
    assert built.repairs == []
    assert built.messages[-1]["content"] == [
        tool_result("t1", "binding from signature"),
        point(cache),
        text("And clause 9?"),
    ]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_synthetic_result_for_a_call_of_the_history_stays_first_before_the_point(cache):
    history = [QUESTION, assistant(text("Looking."), tool_use("t1", clause=8))]
    built = fragment(history, NOW, cache)
    assert [r.kind for r in built.repairs] == ["missing_tool_result"]
    last = built.messages[-1]["content"]
    assert last[0]["toolResult"]["content"] == [{"text": NO_RESULT_RECORDED}]
    assert last[1:] == [point(cache), text("And clause 9?")]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_current_message_answering_the_last_call_leaves_the_point_on_the_call(cache):
    call = assistant(text("Looking."), tool_use("t1", clause=8))
    current = user(tool_result("t1", "binding"), text("so?"))
    built = fragment([QUESTION, call], current, cache)
    assert built.messages == [
        QUESTION,
        assistant(*call["content"], point(cache)),
        current,
    ]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_point_is_never_put_before_a_tool_result(cache):
    # A parallel call half answered in the history, its other half by the current message:
    # the results go first, so the point goes at the end of the calls' message.
    calls = assistant(tool_use("t1", clause=8), tool_use("t2", clause=9))
    history = [QUESTION, calls, user(tool_result("t1", "clause 8: binding"))]
    current = user(tool_result("t2", "clause 9: void"), text("summarise"))
    built = fragment(history, current, cache)
    assert built.messages[1] == assistant(*calls["content"], point(cache))
    assert built.messages[2]["content"] == [
        tool_result("t1", "clause 8: binding"),
        tool_result("t2", "clause 9: void"),
        text("summarise"),
    ]
    # The same when the history's half is a repair's synthetic result.
    built = fragment([QUESTION, calls], current, cache)
    assert built.messages[1] == assistant(*calls["content"], point(cache))
    assert [r.kind for r in built.repairs] == ["missing_tool_result"]


@pytest.mark.parametrize("cache", PLACING, ids=repr)
def test_a_history_block_moved_after_the_current_result_keeps_the_current_out_of_the_prefix(
    cache,
):
    call = assistant(tool_use("t1", clause=8))
    current = user(tool_result("t1", "binding"), text("so?"))
    built = fragment([QUESTION, call, user(text("hello?"))], current, cache)
    assert [r.kind for r in built.repairs] == ["tool_results_moved_first"]
    assert built.messages[1] == assistant(*call["content"], point(cache))
    assert built.messages[2]["content"] == [
        tool_result("t1", "binding"),
        text("hello?"),
        text("so?"),
    ]


def test_the_hour_ttl_is_on_both_points_so_ttls_never_increase():
    built = fragment([QUESTION, ANSWER], NOW, HOUR, MEMORY)
    assert cache_points_of(built.as_json()) == [
        {"type": "default", "ttl": "1h"},
        {"type": "default", "ttl": "1h"},
    ]
    assert built.system[-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


# -- what the validator refuses ------------------------------------------------------------


def test_the_validator_refuses_a_point_with_nothing_before_it_and_an_increasing_ttl():
    five, hour = SLIDING.block(), HOUR.block()
    messages = [QUESTION, ANSWER, NOW]
    assert converse_problems({"system": [text("m"), hour], "messages": messages}) == []
    assert (
        converse_problems(
            {"system": [text("m"), hour], "messages": [QUESTION, assistant(text("a"), five), NOW]}
        )
        == []
    )
    increasing = converse_problems(
        {"system": [text("m"), five], "messages": [QUESTION, assistant(text("a"), hour), NOW]}
    )
    assert any("TTLs must not increase" in p for p in increasing), increasing
    first = converse_problems({"system": [five, text("m")], "messages": messages})
    assert any("nothing before it" in p for p in first), first
    alone = converse_problems({"messages": [QUESTION, assistant(five), NOW]})
    assert any("nothing before it" in p for p in alone), alone
    before_result = converse_problems(
        {
            "messages": [
                QUESTION,
                assistant(tool_use("t1", q=1)),
                user(text("x"), five, tool_result("t1", "r")),
            ]
        }
    )
    assert any("after other content" in p for p in before_result), before_result
    bad = converse_problems({"messages": [user(text("q"), {"cachePoint": {"type": "x"}})]})
    assert any("is not one of" in p for p in bad), bad


# -- over random conversations ---------------------------------------------------------------


@st.composite
def conversations(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None, CachePoints]:
    recorded = draw(tool_conversations())
    window = run(as_turns(recorded, T0), draw(limits()))
    current = user(*draw(contact_messages(pending_calls(recorded))))
    memory = draw(st.sampled_from([None, MEMORY]))
    return window.messages(), current, memory, draw(st.sampled_from(EVERY_CACHE_POINTS))


@given(conversations())
@PROPERTY
def test_every_fragment_carries_its_points_where_they_pay_and_stays_valid(drawn):
    history, current, memory, cache = drawn
    built = converse_fragment(history, current, memory, cache)
    shown = built.as_json()
    assert_valid_for_converse(shown)  # botocore's Converse model and Bedrock's rules
    points = cache_points_of(shown)
    assert len(points) <= MAX_CACHE_POINTS
    bare = converse_fragment(history, current, memory, NO_CACHE_POINTS)
    # Cache points are all that a policy changes: the same blocks, the same repairs.
    assert without_cache_points(shown) == bare.as_json()
    assert built.repairs == bare.repairs
    if not cache.placed:
        assert points == []
        return
    assert all(p == cache.block()["cachePoint"] for p in points)
    in_system = [b for b in shown["system"] if "cachePoint" in b]
    assert len(in_system) == (1 if memory else 0)
    # One point after the history, if anything of the history reached the fragment.
    blocks = [b for m in bare.messages for b in m["content"]]
    current_blocks = Counter(_key(b) for b in bare.messages[-1]["content"]) & Counter(
        _key(b) for b in current["content"]
    )
    history_blocks = len(blocks) - sum(current_blocks.values())
    in_messages = [
        (index, position)
        for index, message in enumerate(shown["messages"])
        for position, block in enumerate(message["content"])
        if "cachePoint" in block
    ]
    assert len(in_messages) == (1 if history_blocks else 0)
    if in_messages:
        # Nothing of the current message is in the cached prefix.
        (index, position) = in_messages[0]
        after = shown["messages"][index]["content"][position + 1 :]
        after += [b for m in shown["messages"][index + 1 :] for b in m["content"]]
        assert not current_blocks - Counter(_key(b) for b in after)


def _key(block: dict[str, Any]) -> str:
    return json.dumps(block, sort_keys=True)


# -- the workflow's model input -------------------------------------------------------------


def test_the_workflow_carries_the_points_with_their_ttl_under_the_sdk_names():
    built = fragment([QUESTION, ANSWER], NOW, HOUR, MEMORY)
    fitted = model_input(built.as_json(), NOW["content"])
    hour = {"CachePoint": {"Type": "default", "Ttl": "1h"}}
    assert fitted.system[1] == hour
    assert fitted.messages[1]["Content"] == [{"Text": "Yes, from signature."}, hour]
    back = {"system": converse_names(fitted.system), "messages": converse_names(fitted.messages)}
    assert back == built.as_json()
    off = model_input(fragment([QUESTION, ANSWER], NOW, OFF, MEMORY).as_json(), NOW["content"])
    assert "CachePoint" not in json.dumps(off.as_json())


def test_shortened_for_the_state_a_point_goes_with_the_blocks_before_it_uncounted():
    built = fragment([user(text("x" * 5000))], NOW, SLIDING).as_json()
    assert built["messages"][-1]["content"] == [text("x" * 5000), point(SLIDING), *NOW["content"]]
    whole = model_input(built, NOW["content"], 10**9)
    fitted = model_input(built, NOW["content"], whole.size - 1)
    assert fitted.omitted_messages == 1  # the unanswered question; the point is no message
    assert fitted.messages == [
        {
            "Role": "user",
            "Content": [{"Text": omitted_for_size_marker(1, False)}, {"Text": "And clause 9?"}],
        }
    ]


def test_shortened_within_the_merged_message_a_point_after_a_kept_block_stays():
    built = fragment([user(text("x" * 5000), text("still there?"))], NOW, SLIDING).as_json()
    whole = model_input(built, NOW["content"], 10**9)
    fitted = model_input(built, NOW["content"], whole.size - 1)
    assert fitted.omitted_messages == 1
    assert fitted.messages[0]["Content"] == [
        {"Text": omitted_for_size_marker(1, False)},
        {"Text": "still there?"},
        {"CachePoint": {"Type": "default"}},
        {"Text": "And clause 9?"},
    ]


def test_shortened_to_older_messages_only_the_point_after_the_history_stays():
    history = [user(text("o" * 4000)), assistant(text("p" * 4000)), QUESTION, ANSWER]
    built = fragment(history, NOW, HOUR, MEMORY).as_json()
    whole = model_input(built, NOW["content"], 10**9)
    fitted = model_input(built, NOW["content"], whole.size - 1)
    assert (fitted.omitted_messages, fitted.memory_omitted) == (2, False)
    hour = {"CachePoint": {"Type": "default", "Ttl": "1h"}}
    assert fitted.system[1] == hour
    assert fitted.messages[1]["Content"][-1] == hour
    assert_valid_for_converse(
        {"system": converse_names(fitted.system), "messages": converse_names(fitted.messages)}
    )
