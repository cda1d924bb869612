"""SPEC 5, prompt caching: where the point after the history and the previous call's point go.

The edges of `converse_fragment`'s placement: a current message of which
nothing reaches the fragment, a history of one message, and the point where
the previous call's history ended (`previous_history`) when that message opens
the fragment, is a tool result, lies past the history's end, or would stand
where the point after the history already does.
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_core.converse_shape import (
    CachePoints,
    ConverseFragment,
    _cache_point_before,
    converse_fragment,
)
from tests.unit.conversation_builders import text, tool_result, tool_use

SLIDING = CachePoints.of("sliding", "5m")
# `stable` places these points as `sliding` does; the hour TTL is on every point.
PLACING = [SLIDING, CachePoints.of("stable", "1h")]
MEMORY = "Counsel asked about clause 7 on 2 November."


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


QUESTION = user(text("Is clause 8 binding?"))
ANSWER = assistant(text("Yes, from signature."))
NOW = user(text("And clause 9?"))
CALLS = assistant(tool_use("t1", clause=8), tool_use("t2", clause=9))


def fragment(
    history: list[dict[str, Any]],
    current: dict[str, Any],
    cache: CachePoints = SLIDING,
    *,
    previous_history: int | None = None,
) -> ConverseFragment:
    return converse_fragment(history, current, None, cache, previous_history=previous_history)


def points_in(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [
        (index, position)
        for index, message in enumerate(messages)
        for position, block in enumerate(message["content"])
        if "cachePoint" in block
    ]


# -- the point after the history --------------------------------------------------------------


@pytest.mark.parametrize("cache", PLACING, ids=["5m", "1h"])
def test_a_current_message_of_blank_text_leaves_the_history_without_a_point(cache):
    # Nothing of the current message reaches the fragment: no block to put the point before,
    # and none of the history's blocks is taken for the current message's.
    built = fragment([QUESTION, ANSWER], user(text("  "), text("")), cache)
    assert built.messages == [QUESTION, ANSWER]
    assert built.repairs == []


@pytest.mark.parametrize("cache", PLACING, ids=["5m", "1h"])
def test_a_current_message_the_repairs_drop_whole_leaves_the_history_without_a_point(cache):
    built = fragment([QUESTION, ANSWER], user(tool_result("ghost", "?")), cache)
    assert built.messages == [QUESTION, ANSWER]
    assert [(r.kind, r.tool_use_id) for r in built.repairs] == [("orphan_tool_result", "ghost")]


@pytest.mark.parametrize(
    "current", [user(text(" ")), user(tool_result("ghost", "?"))], ids=["blank", "orphan"]
)
def test_no_history_and_nothing_left_of_the_current_message_is_no_message_at_all(current):
    built = converse_fragment([], current, MEMORY, SLIDING)
    assert built.messages == []
    assert built.system[1:] == [SLIDING.block()]  # the memory keeps its own point


@pytest.mark.parametrize("cache", PLACING, ids=["5m", "1h"])
def test_a_history_of_one_message_gets_the_point_at_its_end(cache):
    # The current message stands alone after a history of a single message (here the agent's
    # opening greeting): the point ends that message, as it ends the message before any
    # current message standing alone.
    greeting = assistant(text("Hello, how can I help?"))
    built = fragment([greeting], NOW, cache)
    assert built.messages == [assistant(text("Hello, how can I help?"), cache.block()), NOW]


# -- the point where the previous call's history ended ---------------------------------------


def test_in_a_plain_chat_the_previous_point_ends_the_answer_before_the_previous_question():
    history = [QUESTION, ANSWER, user(text("And clause 10?")), assistant(text("Void."))]
    built = fragment(history, NOW, previous_history=2)
    assert built.messages == [
        QUESTION,
        assistant(*ANSWER["content"], SLIDING.block()),
        history[2],
        assistant(text("Void."), SLIDING.block()),
        NOW,
    ]
    # Where the previous call, over the history's first two messages, put its point.
    previous = fragment(history[:2], history[2])
    assert previous.messages == built.messages[:3]


def test_a_previous_question_merged_after_an_unanswered_one_gets_the_point_between():
    # The previous call's history ended on an unanswered question, and its own message
    # merged after it: its point went between the two, and goes there again.
    history = [
        QUESTION,
        ANSWER,
        user(text("hello?")),
        user(text("still there?")),
        assistant(text("Yes: clause 8 binds.")),
    ]
    built = fragment(history, NOW, previous_history=3)
    point = SLIDING.block()
    assert built.messages == [
        QUESTION,
        ANSWER,
        user(text("hello?"), point, text("still there?")),
        assistant(text("Yes: clause 8 binds."), point),
        NOW,
    ]
    previous = fragment(history[:3], history[3])
    assert previous.messages == built.messages[:3]


def test_a_previous_message_the_repairs_dropped_gets_no_point():
    # The previous call's message was a result nobody asked for: the repairs dropped it then
    # and drop it now, so there is no block to put the point before.
    history = [QUESTION, ANSWER, user(tool_result("ghost", "?")), assistant(text("Anything else?"))]
    built = fragment(history, NOW, previous_history=2)
    assert built.messages == [
        QUESTION,
        assistant(*ANSWER["content"], text("Anything else?"), SLIDING.block()),
        NOW,
    ]
    assert [r.kind for r in built.repairs] == ["orphan_tool_result"]


@pytest.mark.parametrize("past", [0, 1], ids=["at the end", "beyond"])
def test_a_previous_history_reaching_the_end_of_the_history_adds_no_point(past):
    history = [QUESTION, ANSWER, user(text("Also clause 10?")), assistant(text("Void."))]
    built = fragment(history, NOW, previous_history=len(history) + past)
    assert built == fragment(history, NOW)
    assert points_in(built.messages) == [(3, 1)]


def test_a_previous_call_whose_history_was_blank_text_gets_no_point_before_the_first_block():
    # The previous call's history held only blank text: its message opens this fragment,
    # with nothing before it to cache.
    history = [user(text("  ")), QUESTION, ANSWER]
    built = fragment(history, NOW, previous_history=1)
    assert built.messages == [QUESTION, assistant(*ANSWER["content"], SLIDING.block()), NOW]


def test_where_the_point_after_the_history_ends_the_previous_message_it_is_not_doubled():
    # The previous call's message was the first result of a parallel call; this call's
    # message opens with the second. Both points belong at the end of the calls' message:
    # one point stands there.
    history = [QUESTION, CALLS, user(tool_result("t1", "clause 8: binding"))]
    current = user(tool_result("t2", "clause 9: void"), text("summarise"))
    built = fragment(history, current, previous_history=2)
    assert built.messages == [
        QUESTION,
        assistant(*CALLS["content"], SLIDING.block()),
        user(*history[2]["content"], *current["content"]),
    ]
    assert built.repairs == []


def test_a_previous_message_of_a_second_result_gets_its_point_at_the_end_of_the_calls():
    # The previous call's history was [question, calls, first result]; its message, the
    # second result, merged after the first, and its point went at the end of the calls'
    # message (a point never precedes a tool result). Here the same prefix is there again.
    history = [
        QUESTION,
        CALLS,
        user(tool_result("t1", "clause 8: binding")),
        user(tool_result("t2", "clause 9: void")),
        assistant(text("8 binds, 9 is void.")),
    ]
    previous = fragment(history[:3], history[3])
    assert points_in(previous.messages) == [(1, 2)]
    built = fragment(history, NOW, previous_history=3)
    assert points_in(built.messages) == [(1, 2), (3, 1)]


def test_a_point_already_just_before_the_anchor_is_not_doubled():
    # Reached directly: in `converse_fragment` the only point placed before the previous
    # call's is the one after the history, which never stands just before a block of it.
    anchor = text("still there?")
    messages = [
        QUESTION,
        ANSWER,
        user(text("hello?"), SLIDING.block(), anchor),
    ]
    assert _cache_point_before(messages, id(anchor), SLIDING.block()) == [
        QUESTION,
        ANSWER,
        user(text("hello?"), SLIDING.block(), text("still there?")),
    ]
