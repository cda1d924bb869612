"""SPEC 5.5.9, the repairs' edges: where a dropped message's neighbours merge, what a user
message asks for, and fragments whose every block is a call or a result."""

from __future__ import annotations

from typing import Any

from memory_core.converse_shape import converse_messages
from memory_core.repairs import repair_tool_blocks
from tests.support.converse_validator import assert_valid_for_converse
from tests.unit.conversation_builders import text, tool_result, tool_use


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def test_an_answer_after_a_dropped_message_merges_into_the_answer_just_before_it():
    # Two exchanges before the dropped message: the answer after it joins the second
    # answer, the one right before it, and the first stays as it was.
    history = [
        user(text("Is clause 7 binding?")),
        assistant(text("Yes.")),
        user(text("And clause 8?")),
        assistant(text("Let me see.")),
        user(tool_result("ghost", "?")),
        assistant(text("Clause 8 is void.")),
    ]
    messages, repairs = converse_messages(history, user(text("Thanks.")))
    assert_valid_for_converse({"messages": messages})
    assert messages == [
        user(text("Is clause 7 binding?")),
        assistant(text("Yes.")),
        user(text("And clause 8?")),
        assistant(text("Let me see."), text("Clause 8 is void.")),
        user(text("Thanks.")),
    ]
    assert [(r.kind, r.message_index, r.tool_use_id) for r in repairs] == [
        ("orphan_tool_result", 4, "ghost")
    ]


def test_a_result_right_after_a_user_message_answers_no_call():
    # Unmerged messages (the repairs expect them merged): a user message asks for nothing,
    # so a result after it is an orphan, left out.
    messages, repairs = repair_tool_blocks(
        [user(text("Is clause 7 binding?")), user(tool_result("t1", "binding"))]
    )
    assert messages == [user(text("Is clause 7 binding?"))]
    assert [(r.kind, r.message_index, r.tool_use_id) for r in repairs] == [
        ("orphan_tool_result", 1, "t1")
    ]


def test_a_fragment_of_calls_alone_is_still_repaired():
    messages, repairs = repair_tool_blocks(
        [assistant(tool_use("t1", clause=7), tool_use("t1", clause=8))]
    )
    assert messages == [assistant(tool_use("t1", clause=7))]
    assert [(r.kind, r.message_index, r.tool_use_id) for r in repairs] == [
        ("duplicate_tool_use", 0, "t1")
    ]


def test_a_fragment_of_results_alone_is_still_repaired():
    # A first message of nothing but a result nobody asked for: nothing is left.
    messages, repairs = converse_messages([], user(tool_result("ghost", "?")))
    assert messages == []
    assert [(r.kind, r.message_index, r.tool_use_id) for r in repairs] == [
        ("orphan_tool_result", 0, "ghost")
    ]
