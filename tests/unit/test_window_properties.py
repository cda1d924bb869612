"""Properties of the window over random conversations (SPEC 5.5).

The reference below works on indexes from the newest turn, eagerly; the window
under test reads lazily. Agreement between the two, and the invariants, hold
for any conversation, any sizes and any limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import timedelta
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from memory_core.converse_shape import converse_messages
from memory_core.tokens import estimate_turn_tokens
from memory_core.trim import TrimShape, trim_text, trim_turn
from memory_core.turns import Turn
from memory_core.window import Window, WindowLimits, build_window
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn

SIZES = st.one_of(
    st.integers(1, 80), st.integers(80, 2000), st.integers(2000, 6000), st.integers(6000, 20_000)
)


@st.composite
def conversations(draw: st.DrawFn) -> list[Turn]:
    clock = Clock(step=timedelta(seconds=draw(st.integers(1, 7200))))
    history: list[Turn] = []

    def body() -> str:
        return draw(st.sampled_from("abcxyz")) * draw(SIZES)

    for _ in range(draw(st.integers(0, 2))):  # answers from before the history starts
        history.append(turn(clock, "assistant", text(body())))
    for exchange in range(draw(st.integers(0, 30))):
        history.append(turn(clock, "user", text(body())))
        for step in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["answer", "tools", "tools+text", "second question"]))
            if kind == "answer":
                history.append(turn(clock, "assistant", text(body())))
            elif kind == "second question":
                history.append(turn(clock, "user", text(body())))
            else:
                calls = [f"call-{exchange}-{step}-{n}" for n in range(draw(st.integers(1, 2)))]
                history.append(turn(clock, "assistant", *(tool_use(c, q=body()) for c in calls)))
                results = [tool_result(c, body()) for c in calls]
                if kind == "tools+text":
                    results.append(text(body()))
                history.append(turn(clock, "user", *results))
    return history


@st.composite
def limits(draw: st.DrawFn) -> WindowLimits:
    max_messages = draw(st.integers(1, 30))
    return WindowLimits(
        max_tokens=draw(st.integers(1, 8000)),
        max_messages=max_messages,
        floor_messages=draw(st.integers(1, max_messages)),
        trim=TrimShape.for_budget(draw(st.integers(2, 2000))),
    )


def floor_of(newest: Sequence[Turn], lim: WindowLimits) -> tuple[int, bool]:
    """How many turns the floor keeps, and whether it had to give some up."""
    floor = min(lim.floor_messages, len(newest))
    if floor == 0:
        return 0, False
    reachable = min(len(newest), lim.max_messages)
    for edge in range(floor - 1, reachable):
        if newest[edge].is_question:
            return edge + 1, False
    questions = [i for i in range(floor) if newest[i].is_question]
    return (questions[-1] + 1 if questions else 0), True


def run(history: list[Turn], lim: WindowLimits) -> Window:
    return build_window(reversed(history), lim, candidate_count=len(history))


@given(conversations(), limits())
def test_the_window_is_the_newest_run_of_whole_exchanges_within_the_cap(history, lim):
    window = run(history, lim)
    kept = window.kept
    assert kept <= lim.max_messages
    assert [t.id for t in window.turns] == [t.id for t in history[len(history) - kept :]]
    if kept:
        assert window.turns[0].is_question
    assert window.dropped == len(history) - kept


@given(conversations(), limits())
def test_the_floor_is_respected_and_the_budget_holds_beyond_it(history, lim):
    window = run(history, lim)
    newest = history[::-1]
    floor, gave_up = floor_of(newest, lim)
    if gave_up:
        assert window.kept == floor
    else:
        assert window.kept >= floor
    if window.kept > floor:
        assert window.estimated_tokens <= lim.max_tokens


@given(conversations(), limits())
def test_the_window_is_maximal(history, lim):
    window = run(history, lim)
    newest = history[::-1]
    _, gave_up = floor_of(newest, lim)
    older = newest[window.kept :]
    edge = next((i for i, t in enumerate(older) if t.is_question), None)
    if gave_up or edge is None:
        return
    exchange = older[: edge + 1]
    tokens = sum(estimate_turn_tokens(trim_turn(t, lim.trim)) for t in exchange)
    assert (
        window.kept + len(exchange) > lim.max_messages
        or window.estimated_tokens + tokens > lim.max_tokens
    )


@given(conversations(), limits())
def test_no_tool_result_is_ever_without_its_tool_use(history, lim):
    seen_calls: set[str] = set()
    for kept in run(history, lim).turns:
        for block in kept.content:
            if "toolUse" in block:
                seen_calls.add(block["toolUse"]["toolUseId"])
            if "toolResult" in block:
                assert block["toolResult"]["toolUseId"] in seen_calls


@given(conversations(), limits(), st.integers(1, 50_000))
def test_history_and_current_make_a_valid_converse_conversation(history, lim, current_chars):
    window = run(history, lim)
    clock = Clock(start=history[-1].sent_at if history else Clock().now)
    current = turn(clock, "user", text("q" * current_chars))
    messages = converse_messages(window.turns, current)
    roles = [m["role"] for m in messages]
    assert roles[0] == "user"
    assert all(a != b for a, b in pairwise(roles))
    for message in messages:
        assert message["content"]
        assert all(b["text"].strip() for b in message["content"] if "text" in b)
    assert messages[-1]["content"][-1] == {"text": "q" * current_chars}


@given(conversations(), limits())
def test_the_reported_figures_are_those_of_the_kept_messages(history, lim):
    window = run(history, lim)
    assert window.estimated_tokens == sum(estimate_turn_tokens(t) for t in window.turns)
    originals = {t.id: t for t in history}
    changed = [t for t in window.turns if t.content != originals[t.id].content]
    assert window.trimmed == len(changed)
    for trimmed in changed:
        assert estimate_turn_tokens(originals[trimmed.id]) > lim.trim.max_message_tokens


@given(conversations(), limits())
def test_the_window_never_reads_more_than_the_cap_and_one(history, lim):
    pulled = 0

    def source() -> Iterator[Turn]:
        nonlocal pulled
        for candidate in reversed(history):
            pulled += 1
            yield candidate

    lazy = build_window(source(), lim)
    assert pulled <= lim.max_messages + 1
    assert [t.id for t in lazy.turns] == [t.id for t in run(history, lim).turns]


MARKER = re.compile(r"… (\d+) tokens omitted …")


@given(st.text(min_size=0, max_size=12_000), st.integers(2, 3000))
def test_a_trim_keeps_the_ends_and_owns_up_to_exactly_what_it_cut(body, max_tokens):
    shape = TrimShape.for_budget(max_tokens)
    trimmed = trim_text(body, shape)
    head, tail = shape.head_tokens * 4, shape.tail_tokens * 4
    if -(-len(body) // 4) <= max_tokens or len(body) <= head + tail:
        assert trimmed == body
        return
    markers = MARKER.findall(trimmed)
    assert len(markers) == 1
    assert trimmed.startswith(body[:head])
    assert trimmed.endswith(body[len(body) - tail :])
    assert int(markers[0]) == -(-(len(body) - head - tail) // 4)
