"""SPEC 5.5.9: the fragment is valid for Converse whatever was recorded; every repair counted."""

from typing import Any

from memory_core.converse_shape import converse_messages, merged_by_role
from memory_core.repairs import NO_RESULT_RECORDED, repair_tool_blocks
from tests.support.converse_validator import assert_valid_for_converse, converse_problems
from tests.unit.conversation_builders import text, tool_result, tool_use


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def no_result(tool_use_id: str) -> dict[str, Any]:
    return {
        "toolResult": {
            "toolUseId": tool_use_id,
            "content": [{"text": NO_RESULT_RECORDED}],
            "status": "error",
        }
    }


def repaired(
    history: list[dict[str, Any]], current: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    unrepaired = merged_by_role([*history, current])
    assert converse_problems({"messages": unrepaired}), "the case needs no repair"
    messages, repairs = converse_messages(history, current)
    assert_valid_for_converse({"messages": messages})
    return messages, [repair.kind for repair in repairs]


def test_a_call_whose_result_was_never_recorded_gets_an_error_result_first_in_the_next_message():
    history = [user(text("weather?")), assistant(tool_use("call:abc", city="Porto"))]
    messages, kinds = repaired(history, user(text("hello? still there?")))
    assert messages[-1]["content"] == [no_result("call:abc"), text("hello? still there?")]
    assert kinds == ["missing_tool_result"]


def test_a_result_that_arrives_after_the_contact_wrote_is_moved_before_the_text():
    history = [
        user(text("weather?")),
        assistant(tool_use("t1", city="Porto")),
        user(text("hello?")),
        user(tool_result("t1", "18 °C")),
    ]
    messages, kinds = repaired(history, user(text("and tomorrow?")))
    assert messages[-1]["content"] == [
        tool_result("t1", "18 °C"),
        text("hello?"),
        text("and tomorrow?"),
    ]
    assert kinds == ["tool_results_moved_first"]


def test_a_result_for_an_id_nobody_asked_for_is_left_out():
    history = [
        user(text("q")),
        assistant(tool_use("t1", q=1)),
        user(tool_result("t1", "ok"), tool_result("ghost", "?")),
        assistant(text("done")),
    ]
    messages, kinds = repaired(history, user(text("thanks")))
    assert messages[2]["content"] == [tool_result("t1", "ok")]
    assert kinds == ["orphan_tool_result"]


def test_a_message_of_orphan_results_alone_disappears_and_the_answers_around_it_merge():
    history = [
        user(text("q")),
        assistant(text("let me see")),
        user(tool_result("ghost", "?")),
        assistant(text("here it is")),
    ]
    messages, kinds = repaired(history, user(text("thanks")))
    assert messages == [
        user(text("q")),
        assistant(text("let me see"), text("here it is")),
        user(text("thanks")),
    ]
    assert kinds == ["orphan_tool_result"]


def test_a_result_for_a_call_two_messages_back_answers_nothing_there():
    history = [
        user(text("q")),
        assistant(tool_use("t1", q=1)),
        user(tool_result("t1", "ok")),
        assistant(text("and?")),
        user(tool_result("t1", "again")),
    ]
    messages, kinds = repaired(history, user(text("next")))
    assert messages[-1]["content"] == [text("next")]
    assert kinds == ["orphan_tool_result"]


def test_parallel_calls_partly_answered_get_an_error_result_for_each_missing_one():
    history = [
        user(text("compare")),
        assistant(
            text("checking both"), tool_use("a", x=1), tool_use("b", x=2), tool_use("c", x=3)
        ),
        user(tool_result("b", "B")),
    ]
    messages, kinds = repaired(history, user(text("so?")))
    assert messages[-1]["content"] == [
        no_result("a"),
        no_result("c"),
        tool_result("b", "B"),
        text("so?"),
    ]
    assert kinds == ["missing_tool_result", "missing_tool_result"]


def test_the_same_result_twice_is_kept_once():
    history = [user(text("q")), assistant(tool_use("t1", q=1)), user(tool_result("t1", "one"))]
    current = user(tool_result("t1", "two"), text("ok"))
    messages, kinds = repaired(history, current)
    assert messages[-1]["content"] == [tool_result("t1", "one"), text("ok")]
    assert kinds == ["duplicate_tool_result"]


def test_two_calls_of_one_id_in_one_message_keep_the_first():
    history = [
        user(text("q")),
        assistant(tool_use("functions.get_weather:0", city="A")),
        assistant(tool_use("functions.get_weather:0", city="B")),
        user(tool_result("functions.get_weather:0", "sunny")),
    ]
    messages, kinds = repaired(history, user(text("ok")))
    assert messages[1]["content"] == [tool_use("functions.get_weather:0", city="A")]
    assert kinds == ["duplicate_tool_use"]


def test_a_valid_fragment_is_left_as_it_is():
    history = [
        user(text("q")),
        assistant(text("checking"), tool_use("t1", q=1), text("one moment")),
        user(tool_result("t1", "found")),
        assistant(text("it says x")),
    ]
    merged = merged_by_role([*history, user(text("thanks"))])
    assert converse_problems({"messages": merged}) == []
    messages, repairs = repair_tool_blocks(merged)
    assert (messages, repairs) == (merged, [])


def test_the_repairs_leave_their_input_untouched():
    history = [user(text("q")), assistant(tool_use("t1", q=1)), assistant(tool_use("t1", q=2))]
    merged = merged_by_role([*history, user(tool_result("x", "?"), text("hi"))])
    snapshot = repr(merged)
    repair_tool_blocks(merged)
    assert repr(merged) == snapshot


def test_each_repair_names_its_message_and_tool_call():
    history = [user(text("q")), assistant(tool_use("t1", q=1))]
    _, repairs = converse_messages(history, user(text("hi"), tool_result("t9", "?")))
    assert [(r.kind, r.message_index, r.tool_use_id) for r in repairs] == [
        ("orphan_tool_result", 2, "t9"),
        ("missing_tool_result", 2, "t1"),
    ]
