"""Every block order Converse allows, read whole (SPEC 4, 5.5.3, 5.5.6, 5.5.8).

A turn's first block tells little about it. A contact's `[text, toolResult]`
returns a result: it belongs to the exchange before it and is no question, so
a window never opens on it. A reply's `[text, toolUse]` costs its call's JSON
text as well as its text. The window reads the usual one-text turn by a
shortcut, and so does the trim: the examples below hold both to every turn
that merely starts with a text, and the trim to keeping every tool call, cut
or whole, with its id and name, its result still in the next message.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.converse_shape import CachePoints, converse_fragment
from memory_core.tokens import compact_json, estimate_content_tokens, text_units, tokens_to_units
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, trim_turn
from memory_core.turns import Role, Turn
from memory_core.window import Window, WindowLimits, build_window
from tests.support.converse_validator import assert_valid_for_converse
from tests.support.tool_conversations import contact_messages, replies, returned_results
from tests.unit.conversation_builders import (
    T0,
    Clock,
    block_kinds,
    chars,
    ids,
    input_of,
    text,
    tool_result,
    tool_use,
    turn,
    window_of,
)

NO_TRIM = TrimShape.for_budget(1_000_000)
SHAPE = TrimShape.for_budget(1000)  # head and tail 400 tokens: 1,969 letters each
NEXT = {"role": "user", "content": [text("And tomorrow?")]}


def limits(
    *,
    max_tokens: int = 1_000_000,
    max_messages: int = 50,
    floor: int = 1,
    trim: TrimShape = NO_TRIM,
) -> WindowLimits:
    return WindowLimits(max_tokens, max_messages, floor, trim)


def fragment_of(window: Window) -> dict[str, Any]:
    """The window's Converse fragment, a next question after it.

    Valid for Converse, and with no call or result mended: the only repair
    allowed moves a contact's results before its text (SPEC 5.5.9).
    """
    fragment = converse_fragment(window.messages(), NEXT, None, CachePoints())
    assert {repair.kind for repair in fragment.repairs} <= {"tool_results_moved_first"}
    assert_valid_for_converse(fragment.as_json())
    return fragment.as_json()


def calls_and_results(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(role, kind, tool id) of every tool block, in order."""
    found = []
    for message in messages:
        for block in message["content"]:
            for kind in ("toolUse", "toolResult"):
                if kind in block:
                    found.append((message["role"], kind, block[kind]["toolUseId"]))
    return found


# -- a contact's text, then a tool result: no question ------------------------------------

CONTACT_ORDERS = {
    "text, result": lambda: [text("ok, here it is"), tool_result("c1", "18°C, sunny")],
    "text, result, text": lambda: [text("ok"), tool_result("c1", "18°C"), text("thanks")],
    "text, text, result": lambda: [text("ok"), text("here"), tool_result("c1", "18°C")],
    # Not starting on a text: the shortcut never sees these; they hold the same rule.
    "result, text": lambda: [tool_result("c1", "18°C, sunny"), text("ok, here it is")],
    "result, text, result": lambda: [
        tool_result("c1", "18°C"),
        text("and the other"),
        tool_result("c2", "12°C"),
    ],
}


def returned_ids(content: list[dict[str, Any]]) -> list[str]:
    return [block["toolResult"]["toolUseId"] for block in content if "toolResult" in block]


def weather_exchange(clock: Clock, contact: list[dict[str, Any]]) -> list[Turn]:
    """A question, a reply calling the tools `contact` returns, `contact`, the answer."""
    calls = [tool_use(tool_use_id, "get_weather") for tool_use_id in returned_ids(contact)]
    return [
        turn(clock, "user", text("What's the weather in Paris and Rome?")),
        turn(clock, "assistant", text("Let me look."), *calls),
        turn(clock, "user", *contact),
        turn(clock, "assistant", text("Paris 18°C, Rome 12°C.")),
    ]


@pytest.mark.parametrize("order", CONTACT_ORDERS)
def test_a_contacts_message_returning_a_result_is_no_question_whatever_its_first_block(order):
    contact = CONTACT_ORDERS[order]()
    history = weather_exchange(Clock(), contact)
    assert not history[2].is_question
    # The floor (1) holds the answer; its edge moves outward past the contact's
    # message, which answers the call before it, onto the question. A budget of
    # one token adds nothing beyond the floor: only the floor can reach the question.
    window = window_of(history, limits(floor=1, max_tokens=1))
    assert ids(window.turns) == ids(history)
    returned = returned_ids(contact)
    assert calls_and_results(fragment_of(window)["messages"]) == [
        *(("assistant", "toolUse", tool_use_id) for tool_use_id in returned),
        *(("user", "toolResult", tool_use_id) for tool_use_id in returned),
    ]


def test_a_contacts_text_then_result_never_opens_the_window_on_an_orphan_result():
    clock = Clock()
    history = weather_exchange(clock, [text("ok"), tool_result("c1", "18°C")])
    window = window_of(history, limits(floor=2, max_messages=10, max_tokens=1))
    assert ids(window.turns) == ids(history)
    assert window.turns[0].is_question
    messages = fragment_of(window)["messages"]
    assert messages[0]["content"] == [text("What's the weather in Paris and Rome?")]
    # The result is still in the message right after its call.
    assert messages[1]["role"] == "assistant"
    assert "toolUse" in messages[1]["content"][1]
    assert messages[2]["content"][0]["toolResult"]["toolUseId"] == "c1"


def test_the_budget_never_adds_an_exchange_from_a_contacts_text_then_result_on():
    clock = Clock()
    older = [
        turn(clock, "user", text(chars(400))),  # a long question: its exchange is over budget
        turn(clock, "assistant", text("Looking."), tool_use("c1", city="Paris")),
        turn(clock, "user", text("thanks"), tool_result("c1", "18°C")),
        turn(clock, "assistant", text("18°C in Paris.")),
    ]
    newer = [turn(clock, "user", text("And Rome?")), turn(clock, "assistant", text("12°C."))]
    history = [*older, *newer]
    # Room for the newer exchange and the older one's last three messages, not its question.
    budget = sum(estimate_content_tokens(t.content) for t in history) - 1
    window = window_of(history, limits(floor=2, max_tokens=budget))
    assert ids(window.turns) == ids(newer)
    assert window.dropped == 4


def test_a_long_tool_loop_reads_back_past_a_contacts_text_then_result_to_its_question():
    clock = Clock()
    question = turn(clock, "user", text("Compare clause 7 across both contracts."))
    answer = turn(clock, "assistant", text("Clause 7 differs in its notice period."))
    history = [
        question,
        turn(clock, "assistant", text("Reading the first."), tool_use("c1", contract=1)),
        turn(clock, "user", tool_result("c1", "30 days")),
        turn(clock, "assistant", text("Now the second."), tool_use("c2", contract=2)),
        turn(clock, "user", text("here you go"), tool_result("c2", "60 days")),
        answer,
    ]
    # No question within the cap of 3: the exchange is longer than the cap (SPEC 5.5.7).
    window = window_of(history, limits(floor=1, max_messages=3))
    assert window.omission is not None
    assert window.omission.question_kept
    assert window.omission.omitted == 4
    assert ids(window.turns) == ids([question, answer])
    fragment_of(window)


# -- a reply's text, then a tool call: estimated whole ------------------------------------


def drafting(clock: Clock, input_chars: int, lead: str = "On it.") -> list[Turn]:
    """A question, a reply of a short text then a call of `input_chars`, its result, an answer."""
    return [
        turn(clock, "user", text("Draft the lease.")),
        turn(clock, "assistant", text(lead), tool_use("c1", "draft", **input_of(input_chars))),
        turn(clock, "user", tool_result("c1", "drafted")),
        turn(clock, "assistant", text("The draft is ready.")),
    ]


def test_a_reply_of_text_then_a_4000_character_call_is_estimated_by_its_whole_content():
    history = drafting(Clock(), 4000)
    reply = history[1]
    whole = estimate_content_tokens(reply.content)
    # "On it.": four letters, a space and a full stop, 4 * 13 + 1 + 64 = 117 units (2 tokens).
    # The call's JSON text, 4,054 characters: 4,024 letters, the digit of "c1", and 29
    # quotes, braces, colons and commas.
    call_units = 4024 * 13 + 32 + 29 * 16
    assert whole == -(-(117 + call_units) // 64) == 827
    window = window_of(history, limits())
    assert window.turn_tokens[1] == whole
    assert window.estimated_tokens == sum(estimate_content_tokens(t.content) for t in history)


def test_an_older_exchange_whose_reply_is_text_then_a_large_call_crosses_the_budget():
    clock = Clock()
    older = drafting(clock, 4000)
    newer = [turn(clock, "user", text("Thanks!")), turn(clock, "assistant", text("Anytime."))]
    # 500 tokens hold the older exchange's texts many times over, never its call.
    window = window_of([*older, *newer], limits(floor=2, max_tokens=500))
    assert ids(window.turns) == ids(newer)
    assert window.dropped == 4
    assert window.estimated_tokens <= 500


def test_a_reply_of_text_then_an_oversized_call_is_trimmed_and_its_result_still_follows():
    history = drafting(Clock(), 10_000)
    window = window_of(history, limits(trim=SHAPE))
    assert window.trimmed_turns == (False, True, False, False)
    kept_reply = window.turns[1]
    assert block_kinds(kept_reply.content) == ["text", "toolUse"]
    assert kept_reply.content[0] == text("On it.")
    call = kept_reply.content[1]["toolUse"]
    assert (call["toolUseId"], call["name"]) == ("c1", "draft")
    assert set(call["input"]) == {TRIMMED_INPUT_KEY}
    assert "tokens omitted" in call["input"][TRIMMED_INPUT_KEY]
    assert window.turn_tokens[1] == estimate_content_tokens(kept_reply.content)
    assert window.turn_tokens[1] < 1000
    messages = fragment_of(window)["messages"]
    assert calls_and_results(messages) == [
        ("assistant", "toolUse", "c1"),
        ("user", "toolResult", "c1"),
    ]


# -- the trim keeps every tool call, whole or cut -----------------------------------------

WEATHER = tool_use("w1", "get_weather", city="Paris")
NEWS = tool_use("w2", "get_news", topic="rail strikes")
LONG = chars(2000, "l")  # twice the message budget

WHOLE_CALL_ORDERS = {
    # The call lies in the tail, the head or both ends of the kept text: it stays whole.
    "long text, call": [text(LONG), WEATHER],
    "call, long text": [WEATHER, text(LONG)],
    "text, call, long text": [text("Checking."), WEATHER, text(LONG)],
    "long text, parallel calls": [text(LONG), WEATHER, NEWS],
    "call, long text, call": [WEATHER, text(LONG), NEWS],
}


@pytest.mark.parametrize("order", WHOLE_CALL_ORDERS)
def test_a_call_kept_whole_while_the_text_beside_it_is_cut_stays_as_it_was(order):
    content = WHOLE_CALL_ORDERS[order]
    reply = turn(Clock(), "assistant", *content)
    trimmed = trim_turn(reply, SHAPE)
    assert trimmed is not reply
    assert block_kinds(trimmed.content) == block_kinds(content)
    for before, after in zip(content, trimmed.content, strict=True):
        if before == text(LONG):
            assert "tokens omitted" in after["text"]
        else:
            assert after == before  # a call, or a short text within the head


CUT_CALL_ORDERS = {
    "text, long call": [text("Drafting."), tool_use("d1", "draft", **input_of(12_000))],
    "long call, text": [tool_use("d1", "draft", **input_of(12_000)), text("Drafted.")],
    # The call lies wholly inside the cut: only its marker is left of its input.
    "long text, call, long text": [
        text(chars(1000, "a")),
        tool_use("d1", "draft", **input_of(3000)),
        text(chars(1000, "z")),
    ],
}


@pytest.mark.parametrize("order", CUT_CALL_ORDERS)
def test_a_cut_call_keeps_its_id_and_name_and_its_result_follows_in_the_next_message(order):
    clock = Clock()
    history = [
        turn(clock, "user", text("Draft the lease.")),
        turn(clock, "assistant", *CUT_CALL_ORDERS[order]),
        turn(clock, "user", tool_result("d1", "drafted")),
        turn(clock, "assistant", text("The draft is ready.")),
    ]
    trimmed = trim_turn(history[1], SHAPE)
    assert block_kinds(trimmed.content) == block_kinds(history[1].content)
    (call,) = (block["toolUse"] for block in trimmed.content if "toolUse" in block)
    assert (call["toolUseId"], call["name"]) == ("d1", "draft")
    assert set(call["input"]) == {TRIMMED_INPUT_KEY}
    assert "tokens omitted" in call["input"][TRIMMED_INPUT_KEY]
    # Through the window: the cut call is answered in the very next message.
    window = window_of(history, limits(trim=SHAPE))
    assert window.trimmed_turns == (False, True, False, False)
    assert window.turns[1].content == trimmed.content
    assert calls_and_results(fragment_of(window)["messages"]) == [
        ("assistant", "toolUse", "d1"),
        ("user", "toolResult", "d1"),
    ]


# -- properties: every order the generators draw ------------------------------------------

PENDING = ["call-1", "call-2"]
# A call kept whole in a cut message is one draw in a few dozen: more examples than the default.
MORE = settings(max_examples=max(300, settings().max_examples))


@st.composite
def messages(draw: st.DrawFn) -> tuple[Role, list[dict[str, Any]]]:
    """One history message in any order the API admits: a reply, a contact's, results only."""
    kind = draw(st.sampled_from(["reply", "contact", "results"]))
    if kind == "reply":
        calls = draw(st.integers(0, 3))
        return "assistant", draw(replies([f"call-{n}" for n in range(1, calls + 1)]))
    if kind == "contact":
        return "user", draw(contact_messages(PENDING))
    return "user", draw(returned_results(PENDING))


@given(messages())
def test_the_window_reads_a_message_of_any_block_order_whole(message):
    role, content = message
    question = Turn("m0", "user", [text("q")], T0)
    read = Turn("m1", role, content, T0.replace(minute=1))
    tokens = estimate_content_tokens(content)
    # The budget holds the message and not one token more: the question before it is
    # kept only because the floor must reach a question, i.e. if the message is none.
    window = build_window([read, question], limits(floor=1, max_tokens=tokens), 2)
    assert ids(window.turns) == (["m1"] if read.is_question else ["m0", "m1"])
    assert window.turns[0].is_question
    assert window.turn_tokens == tuple(estimate_content_tokens(t.content) for t in window.turns)
    assert window.estimated_tokens == sum(window.turn_tokens)


def trimmable_units(content: list[dict[str, Any]]) -> int:
    """The cost of what the trim cuts, as one string: texts, tool inputs' and results' texts."""
    total = 0
    for block in content:
        if "text" in block:
            total += text_units(block["text"])
        elif "toolUse" in block:
            total += text_units(compact_json(block["toolUse"]["input"]))
        else:
            for item in block["toolResult"]["content"]:
                total += text_units(item["text"] if "text" in item else compact_json(item["json"]))
    return total


@given(messages(), st.one_of(st.integers(2, 60), st.integers(60, 3000)))
@MORE
def test_the_trim_keeps_every_block_of_any_order_and_every_tool_id(message, budget):
    role, content = message
    shape = TrimShape.for_budget(budget)
    original = Turn("m1", role, content, T0)
    trimmed = trim_turn(original, shape)
    over = estimate_content_tokens(content) > budget
    cuttable = trimmable_units(content) > tokens_to_units(shape.head_tokens + shape.tail_tokens)
    assert (trimmed is not original) == (over and cuttable)
    assert block_kinds(trimmed.content) == block_kinds(content)
    for before, after in zip(content, trimmed.content, strict=True):
        if "toolUse" in before:
            call, kept = before["toolUse"], after["toolUse"]
            assert (kept["toolUseId"], kept["name"]) == (call["toolUseId"], call["name"])
            assert kept["input"] == call["input"] or set(kept["input"]) == {TRIMMED_INPUT_KEY}
        elif "toolResult" in before:
            assert after["toolResult"]["toolUseId"] == before["toolResult"]["toolUseId"]
    if trimmed is not original:
        assert any("tokens omitted" in compact_json(block) for block in trimmed.content)
