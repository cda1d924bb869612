"""SPEC 5.5.7: an exchange longer than the cap shows its question, a count, its newest part."""

from typing import Any

from memory_core.converse_shape import CachePoints, converse_fragment
from memory_core.tokens import estimate_content_tokens
from memory_core.turns import Turn
from memory_core.window import NO_QUESTION_MARKER, build_window, exchange_omission_marker
from tests.support.converse_validator import assert_valid_for_converse
from tests.unit.conversation_builders import (
    Clock,
    CountingReader,
    chars,
    default_limits,
    ids,
    text,
    tool_result,
    tool_use,
    turn,
    window_of,
)


def tool_loop(clock: Clock, pairs: int, result_chars: int = 40) -> list[Turn]:
    """A question answered by `pairs` tool calls and their results, then an answer."""
    turns = [turn(clock, "user", text("What changed in clause 7 since March?"))]
    for n in range(pairs):
        turns.append(turn(clock, "assistant", tool_use(f"functions.lookup:{n}", clause=7)))
        turns.append(turn(clock, "user", tool_result(f"functions.lookup:{n}", "r" * result_chars)))
    turns.append(turn(clock, "assistant", text("Clause 7 changed twice.")))
    return turns


def fragment_of(history: list[Turn], current: dict[str, Any]) -> dict[str, Any]:
    window = window_of(history)
    return converse_fragment(window.messages(), current, None, CachePoints()).as_json()


def test_a_question_answered_by_13_tool_pairs_keeps_the_question_a_count_and_the_newest():
    history = tool_loop(Clock(), 13)  # 28 turns, the cap is 25
    window = window_of(history)
    messages = window.messages()
    assert messages[0]["content"] == [
        {"text": "What changed in clause 7 since March?"},
        {"text": "… 4 messages of this exchange omitted …"},
    ]
    # The newest 23 start on a tool call (the 24th newest is a result: its call would
    # break the cap), so every result keeps its call.
    assert ids(window.turns) == ids([history[0], *history[-23:]])
    assert window.turns[1].role == "assistant"
    assert (window.kept, window.dropped) == (24, 4)
    assert window.omission is not None
    assert window.omission.omitted == 4
    assert ids(window.passed_over) == ids(reversed(history[1:5]))
    assert window.estimated_tokens == sum(estimate_content_tokens(m["content"]) for m in messages)
    assert_valid_for_converse(
        converse_fragment(
            messages, {"role": "user", "content": [text("thanks")]}, None, CachePoints()
        ).as_json()
    )


def test_a_question_answered_by_26_replies_keeps_the_question_and_the_newest_24():
    clock = Clock()
    question = turn(clock, "user", text("Tell me everything about the lease."))
    replies = [turn(clock, "assistant", text(f"Part {n}.")) for n in range(26)]
    window = window_of([question, *replies])
    assert ids(window.turns) == ids([question, *replies[-24:]])
    assert window.messages()[0]["content"][-1] == {"text": exchange_omission_marker(2)}
    assert window.kept == 25


def test_an_exchange_exactly_at_the_cap_is_kept_whole_and_one_more_message_is_omitted():
    clock = Clock()
    question = turn(clock, "user", text("Go through the list."))
    at_cap = [question, *(turn(clock, "assistant", text(f"item {n}")) for n in range(24))]
    window = window_of(at_cap)
    assert window.omission is None
    assert ids(window.turns) == ids(at_cap)
    one_over = [*at_cap, turn(clock, "assistant", text("item 24"))]
    window = window_of(one_over)
    assert window.omission is not None
    assert window.omission.omitted == 1
    assert ids(window.turns) == ids([question, *one_over[-24:]])


def test_the_floor_is_kept_over_the_budget_and_nothing_more():
    history = tool_loop(Clock(), 20, result_chars=len(chars(900)))
    window = window_of(history)
    # Ten newest end on a result (index 9): the edge moves out to its call, eleven kept.
    assert window.kept == 1 + 11
    assert window.estimated_tokens > 4000
    assert window.turns[1].role == "assistant"
    assert window.omission is not None
    assert window.omission.omitted == 41 - 11


def test_beyond_the_floor_the_budget_stops_the_exchange_at_an_answer():
    limits = default_limits(HISTORY_WINDOW_FLOOR_MESSAGES="2")
    history = tool_loop(Clock(), 20, result_chars=len(chars(500)))
    window = window_of(history, limits)
    assert window.estimated_tokens <= 4000
    assert window.kept < 25 - 1  # the budget stopped it, not the cap
    assert window.turns[1].role == "assistant"
    omitted = window.omission.omitted if window.omission else 0
    # One more call and its result would not fit.
    question_and_run = window.estimated_tokens
    next_pair = estimate_content_tokens(
        [*history[-window.kept].content, *history[-window.kept - 1].content]
    )
    assert question_and_run + next_pair > 4000
    assert omitted == 41 - (window.kept - 1)


def test_the_window_reads_back_to_a_question_far_beyond_the_cap_and_no_further():
    clock = Clock()
    older = [turn(clock, "user", text("an older question")), turn(clock, "assistant", text("ok"))]
    history = [*older, *tool_loop(clock, 60)]
    reader = CountingReader(history)
    window = build_window(reader, default_limits())
    assert (
        reader.pulled == 122
    )  # the 121 turns of the exchange after its question, and the question
    assert window.turns[0].id == history[2].id
    assert window.omission is not None
    assert window.omission.omitted == 121 - 23


def test_a_long_question_is_trimmed_like_any_history_message():
    clock = Clock()
    question = turn(clock, "user", text("Q" * 10_000))
    replies = [turn(clock, "assistant", text(f"step {n}")) for n in range(30)]
    window = window_of([question, *replies])
    first = window.messages()[0]["content"]
    assert "tokens omitted …" in first[0]["text"]
    assert first[-1] == {"text": exchange_omission_marker(6)}
    assert window.trimmed == 1


def test_a_conversation_the_agent_opened_shows_its_messages_after_a_marker_of_its_own():
    clock = Clock()
    greeting = turn(clock, "assistant", text("Hi Ana, your application is missing a document."))
    window = window_of([greeting])
    assert window.messages() == [
        {"role": "user", "content": [{"text": NO_QUESTION_MARKER}]},
        greeting.as_message(),
    ]
    assert window.kept == 1
    assert window.omission is not None
    assert not window.omission.question_kept
    assert_valid_for_converse(
        converse_fragment(
            window.messages(),
            {"role": "user", "content": [text("which one?")]},
            None,
            CachePoints(),
        ).as_json()
    )


def test_an_exchange_whose_question_is_gone_counts_what_it_leaves_out_too():
    clock = Clock()
    replies = [turn(clock, "assistant", text(f"update {n}")) for n in range(30)]
    window = window_of(replies)
    marker = window.messages()[0]
    assert marker == {
        "role": "user",
        "content": [{"text": NO_QUESTION_MARKER + "\n" + exchange_omission_marker(6)}],
    }
    assert window.kept == 24  # the marker's message counts against the cap of 25


def test_a_cap_of_one_shows_the_question_and_the_count():
    limits = default_limits(HISTORY_WINDOW_MAX_MESSAGES="1", HISTORY_WINDOW_FLOOR_MESSAGES="1")
    history = tool_loop(Clock(), 2)
    window = window_of(history, limits)
    assert ids(window.turns) == ids(history[:1])
    assert window.messages()[0]["content"][-1] == {"text": exchange_omission_marker(5)}


def test_where_the_cap_stops_the_floor_on_a_result_the_edge_moves_in_and_does_not_grow():
    limits = default_limits(HISTORY_WINDOW_MAX_MESSAGES="11", HISTORY_WINDOW_FLOOR_MESSAGES="10")
    history = tool_loop(Clock(), 13)
    window = window_of(history, limits)
    # Room for 10 after the question; the 10th newest is a result: the edge moves in to 9.
    assert ids(window.turns) == ids([history[0], *history[-9:]])
    assert window.omission is not None
    assert window.omission.omitted == 27 - 9


def test_the_contact_returning_the_last_result_follows_its_call():
    history = tool_loop(Clock(), 13)[:-2]  # the loop, its last call still unanswered
    last_call = history[-1].content[0]["toolUse"]["toolUseId"]
    current = {
        "role": "user",
        "content": [text("here is the result"), tool_result(last_call, "42")],
    }
    fragment = fragment_of(history, current)
    assert fragment["messages"][0]["content"][0] == {
        "text": "What changed in clause 7 since March?"
    }
    assert fragment["messages"][-1]["content"][0]["toolResult"]["toolUseId"] == last_call
    assert_valid_for_converse(fragment)
