"""Which tool calls a message of results may answer: the newest assistant message's, unanswered."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory_core.converse_shape import converse_messages
from memory_core.pending_calls import answers_only_tools, unanswered_calls
from memory_core.turns import Turn
from tests.unit.conversation_builders import (
    Clock,
    CountingReader,
    text,
    tool_result,
    tool_use,
    turn,
)


def pending(*oldest_first: Turn) -> list[str]:
    return unanswered_calls(reversed(oldest_first))


def test_nothing_is_pending_in_an_empty_conversation() -> None:
    assert pending() == []


def test_a_question_then_a_call_leaves_the_call_pending() -> None:
    clock = Clock()
    assert pending(turn(clock, "user", text("Q")), turn(clock, "assistant", tool_use("c1"))) == [
        "c1"
    ]


def test_parallel_calls_are_pending_oldest_first_across_merged_assistant_turns() -> None:
    clock = Clock()
    assert pending(
        turn(clock, "user", text("Q")),
        turn(clock, "assistant", text("Let me look."), tool_use("c1"), tool_use("c2")),
        turn(clock, "assistant", tool_use("c3")),
        turn(clock, "assistant", text("One moment.")),
    ) == ["c1", "c2", "c3"]


def test_a_recorded_result_answers_its_call_and_leaves_the_others() -> None:
    clock = Clock()
    assert pending(
        turn(clock, "user", text("Q")),
        turn(clock, "assistant", tool_use("c1"), tool_use("c2"), tool_use("c3")),
        turn(clock, "user", tool_result("c2", "two")),
        turn(clock, "user", tool_result("c1", "one")),
    ) == ["c3"]


def test_only_the_newest_assistant_message_is_asked() -> None:
    """An older call left unanswered was closed by the next message (the window repairs it)."""
    clock = Clock()
    assert pending(
        turn(clock, "user", text("Q")),
        turn(clock, "assistant", tool_use("c1"), tool_use("old")),
        turn(clock, "user", tool_result("c1", "one")),
        turn(clock, "assistant", tool_use("c2")),
    ) == ["c2"]


def test_an_answer_without_calls_leaves_nothing_pending() -> None:
    clock = Clock()
    assert (
        pending(
            turn(clock, "user", text("Q")),
            turn(clock, "assistant", tool_use("c1")),
            turn(clock, "user", tool_result("c1", "one")),
            turn(clock, "assistant", text("Done.")),
        )
        == []
    )


def test_an_answer_after_part_of_the_results_closes_the_other_calls() -> None:
    clock = Clock()
    assert (
        pending(
            turn(clock, "user", text("Q")),
            turn(clock, "assistant", tool_use("c1"), tool_use("c2")),
            turn(clock, "user", tool_result("c1", "one")),
            turn(clock, "assistant", text("I could only check one.")),
        )
        == []
    )


def test_the_contacts_text_since_the_call_closes_it() -> None:
    clock = Clock()
    call = turn(clock, "assistant", tool_use("c1"))
    assert pending(turn(clock, "user", text("Q")), call, turn(clock, "user", text("Hello?"))) == []
    mixed = turn(clock, "user", tool_result("c1", "one"), text("and also"))
    assert pending(turn(clock, "user", text("Q")), call, mixed) == []


def test_it_reads_no_further_than_the_turn_before_the_calls() -> None:
    clock = Clock()
    history = [
        *[turn(clock, "user", text(f"Q{n}")) for n in range(5)],
        turn(clock, "assistant", tool_use("c1")),
        turn(clock, "user", tool_result("c1", "one")),
    ]
    reader = CountingReader(history)
    assert unanswered_calls(reader) == []
    assert reader.pulled == 3


def test_a_message_of_results_alone_is_told_from_the_contacts_words() -> None:
    clock = Clock()
    assert answers_only_tools(turn(clock, "user", tool_result("c1", "a"), tool_result("c2", "b")))
    assert not answers_only_tools(turn(clock, "user", tool_result("c1", "a"), text("and")))
    assert not answers_only_tools(turn(clock, "user", text("Q")))


# Random tool conversations: whatever the order, a result for a pending call is one Converse
# takes right after the history, and every other call of that message is the history's own.
ROLES = st.lists(
    st.tuples(
        st.sampled_from(["question", "calls", "results", "reply"]),
        st.integers(min_value=1, max_value=3),
    ),
    max_size=10,
)


@given(steps=ROLES)
def test_pending_calls_are_those_the_next_message_must_answer(
    steps: list[tuple[str, int]],
) -> None:
    clock = Clock()
    history: list[Turn] = [turn(clock, "user", text("Q"))]
    calls_made = 0
    asked: list[str] = []
    for kind, count in steps:
        if kind == "question":
            history.append(turn(clock, "user", text("more")))
            asked = []
        elif kind == "calls":
            ids = [f"c{calls_made + n}" for n in range(count)]
            calls_made += count
            if history[-1].role != "assistant":
                asked = []
            asked += ids
            history.append(turn(clock, "assistant", *(tool_use(i) for i in ids)))
        elif kind == "results" and asked:
            answered, asked = asked[:count], asked[count:]
            history.append(turn(clock, "user", *(tool_result(i, "r") for i in answered)))
        elif kind == "reply":
            if history[-1].role != "assistant":
                asked = []  # a new assistant message, without calls
            history.append(turn(clock, "assistant", text("a reply")))
    found = pending(*history)
    assert found == asked
    if found:
        # Answering them all, the fragment needs no repair for the newest calls.
        current = {"role": "user", "content": [tool_result(i, "r") for i in found]}
        _, repairs = converse_messages([t.as_message() for t in history], current)
        assert not [r for r in repairs if r.tool_use_id in found]
