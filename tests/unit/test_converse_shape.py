from typing import Any

from memory_core.converse_shape import (
    NO_CACHE_POINTS,
    CachePoints,
    converse_fragment,
    converse_messages,
    converse_system,
    sdk_member_names,
)
from memory_core.turns import Turn
from tests.unit.conversation_builders import (
    Clock,
    alternating,
    text,
    tool_result,
    tool_use,
    turn,
    window_of,
)


def messages_of(history: list[Turn], current: Turn) -> list[dict[str, Any]]:
    messages, repairs = converse_messages([t.as_message() for t in history], current.as_message())
    assert repairs == []
    return messages


def test_history_then_current_alternate_starting_with_the_user():
    clock = Clock()
    history = alternating(clock, 4)
    current = turn(clock, "user", text("and now?"))
    messages = messages_of(history, current)
    assert [m["role"] for m in messages] == ["user", "assistant"] * 2 + ["user"]
    assert messages[-1]["content"] == [{"text": "and now?"}]


def test_an_unanswered_question_and_the_current_one_merge_into_one_message_in_order():
    clock = Clock()
    history = [*alternating(clock, 2), turn(clock, "user", text("hello?"))]
    current = turn(clock, "user", text("anyone?"))
    messages = messages_of(history, current)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"] == [{"text": "hello?"}, {"text": "anyone?"}]


def test_consecutive_answers_merge_too():
    clock = Clock()
    history = [
        turn(clock, "user", text("q")),
        turn(clock, "assistant", text("a human agent took over")),
        turn(clock, "assistant", text("here is the answer")),
    ]
    messages = messages_of(history, turn(clock, "user", text("thanks")))
    assert messages[1] == {
        "role": "assistant",
        "content": [{"text": "a human agent took over"}, {"text": "here is the answer"}],
    }


def test_an_empty_history_gives_the_current_message_alone():
    clock = Clock()
    current = turn(clock, "user", text("first message"))
    assert messages_of([], current) == [{"role": "user", "content": [{"text": "first message"}]}]


def test_empty_text_blocks_are_left_out():
    clock = Clock()
    history = [turn(clock, "user", text("q"), text("  ")), turn(clock, "assistant", text(""))]
    messages = messages_of(history, turn(clock, "user", text("next")))
    assert messages == [{"role": "user", "content": [{"text": "q"}, {"text": "next"}]}]


def test_tool_blocks_keep_their_order_and_pairing():
    clock = Clock()
    history = [
        turn(clock, "user", text("look it up")),
        turn(clock, "assistant", text("checking"), tool_use("c1", q="x")),
        turn(clock, "user", tool_result("c1", "found")),
        turn(clock, "assistant", text("it says x")),
    ]
    messages = messages_of(history, turn(clock, "user", text("ok")))
    assert messages[1]["content"][1]["toolUse"]["toolUseId"] == "c1"
    assert messages[2]["content"][0]["toolResult"]["toolUseId"] == "c1"


def test_the_memory_goes_in_system_followed_by_a_cache_point():
    system = converse_system("Counsel asked about clause 7 on 2 November.", CachePoints())
    assert len(system) == 2
    assert system[0]["text"].endswith("Counsel asked about clause 7 on 2 November.")
    assert system[1] == {"cachePoint": {"type": "default"}}


def test_without_memory_there_is_no_system_block():
    for cache in (CachePoints(), CachePoints(ttl="1h"), NO_CACHE_POINTS):
        assert converse_system(None, cache) == []
        assert converse_system("", cache) == []


def test_the_current_message_is_never_trimmed_even_at_40000_characters():
    clock = Clock()
    history = alternating(clock, 30, tokens_each=2000)
    pasted = "clause " * 5715 + "end."
    current = turn(clock, "user", text(pasted))
    assert len(pasted) >= 40_000
    window = window_of(history)
    assert window.trimmed == window.kept
    fragment = converse_fragment(window.messages(), current.as_message(), None, CachePoints())
    assert fragment.messages[-1]["content"][-1] == {"text": pasted}
    assert all(current.id != t.id for t in window.turns)


def test_step_functions_gets_the_member_names_of_the_api_reference():
    fragment = {
        "system": [{"text": "memory"}, {"cachePoint": {"type": "default"}}],
        "messages": [
            {"role": "user", "content": [{"text": "q"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": "n", "input": {"lower": 1}}}],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": [{"json": {"keep": "me"}}]}}
                ],
            },
        ],
    }
    assert sdk_member_names(fragment) == {
        "System": [{"Text": "memory"}, {"CachePoint": {"Type": "default"}}],
        "Messages": [
            {"Role": "user", "Content": [{"Text": "q"}]},
            {
                "Role": "assistant",
                "Content": [{"ToolUse": {"ToolUseId": "t1", "Name": "n", "Input": {"lower": 1}}}],
            },
            {
                "Role": "user",
                "Content": [
                    {"ToolResult": {"ToolUseId": "t1", "Content": [{"Json": {"keep": "me"}}]}}
                ],
            },
        ],
    }
