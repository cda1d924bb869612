"""Properties of the window and the fragment over random tool-heavy conversations (SPEC 5.5).

The expectations below work on indexes from the newest turn, eagerly; the
window under test reads lazily. The conversations are every shape the API
admits (`tests/support/tool_conversations.py`): parallel calls, text before
and after tool blocks, missing results, results for unknown ids, oversized
inputs and results, long loops, same-role runs, a conversation the agent
opens. Every fragment is checked by botocore's own Converse model and
Bedrock's rules (`tests/support/converse_validator.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.converse_shape import CachePoints, converse_fragment, merged_by_role
from memory_core.repairs import NO_RESULT_RECORDED
from memory_core.tokens import (
    estimate_content_tokens,
    estimate_tokens,
    estimate_turn_tokens,
    text_units,
    tokens_to_units,
)
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, trim_text, trim_turn
from memory_core.turns import Turn
from memory_core.window import ExchangeOmission, Window, WindowLimits, build_window
from tests.support.converse_validator import assert_valid_for_converse, converse_problems
from tests.support.tool_conversations import (
    as_turns,
    contact_messages,
    pending_calls,
    tool_conversations,
)
from tests.unit.conversation_builders import EVERY_CACHE_POINTS, T0, CountingReader

# More examples than the profile's default: the shapes are many (the deep profile, more).
# A long tool loop can outgrow Hypothesis's buffer now and then; such draws are skipped.
PROPERTY = settings(
    max_examples=max(150, settings().max_examples),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def limits(draw: st.DrawFn) -> WindowLimits:
    max_messages = draw(st.integers(1, 30))
    return WindowLimits(
        max_tokens=draw(st.integers(1, 8000)),
        max_messages=max_messages,
        floor_messages=draw(st.integers(1, max_messages)),
        trim=TrimShape.for_budget(draw(st.integers(2, 2000))),
    )


@st.composite
def histories(draw: st.DrawFn) -> list[Turn]:
    return as_turns(draw(tool_conversations()), T0)


def run(history: list[Turn], lim: WindowLimits) -> Window:
    return build_window(reversed(history), lim, candidate_count=len(history))


@dataclass(frozen=True)
class Expected:
    """The window's shape, read off the candidates by index (0 is the newest)."""

    long_exchange: bool
    question: int | None
    """Index of the exchange's question (the long shape), None if it is not a candidate."""
    end: int
    room: int
    floor_run: int
    floor_held: bool


def expected_shape(newest: Sequence[Turn], lim: WindowLimits) -> Expected:
    reachable = min(len(newest), lim.max_messages)
    if any(newest[i].is_question for i in range(reachable)) or not newest:
        return Expected(False, None, 0, 0, 0, True)
    question = next((i for i, t in enumerate(newest) if t.is_question), None)
    end = len(newest) if question is None else question
    room = min(lim.max_messages - 1, end)
    floor = min(lim.floor_messages, room)
    outward = [r for r in range(max(floor, 1), room + 1) if newest[r - 1].role == "assistant"]
    if outward or floor == 0:
        return Expected(True, question, end, room, outward[0] if outward else 0, True)
    inward = [r for r in range(1, floor) if newest[r - 1].role == "assistant"]
    return Expected(True, question, end, room, inward[-1] if inward else 0, False)


def floor_of(newest: Sequence[Turn], lim: WindowLimits) -> tuple[int, bool]:
    """How many turns the floor keeps, and whether it had to give some up (whole exchanges)."""
    floor = min(lim.floor_messages, len(newest))
    if floor == 0:
        return 0, False
    reachable = min(len(newest), lim.max_messages)
    for edge in range(floor - 1, reachable):
        if newest[edge].is_question:
            return edge + 1, False
    questions = [i for i in range(floor) if newest[i].is_question]
    return (questions[-1] + 1 if questions else 0), True


@given(histories(), limits())
@PROPERTY
def test_the_window_is_never_empty_and_never_over_the_cap(history, lim):
    window = run(history, lim)
    messages = window.messages()
    assert window.kept <= lim.max_messages
    assert len(messages) <= lim.max_messages
    assert (not messages) == (not history)
    assert window.dropped == len(history) - window.kept


@given(histories(), limits())
@PROPERTY
def test_the_window_is_the_newest_whole_exchanges_or_the_long_exchange_shape(history, lim):
    window = run(history, lim)
    newest = history[::-1]
    shape = expected_shape(newest, lim)
    if not shape.long_exchange:
        assert window.omission is None
        kept = window.kept
        assert [t.id for t in window.turns] == [t.id for t in history[len(history) - kept :]]
        if kept:
            assert window.turns[0].is_question
        return
    # SPEC 5.5.7: the question, a true count of what is left out, the newest from an answer.
    assert window.omission is not None
    assert window.omission.question_kept == (shape.question is not None)
    run_turns = window.turns[1:] if shape.question is not None else window.turns
    if shape.question is not None:
        assert window.turns[0].id == newest[shape.question].id
    count = len(run_turns)
    assert count <= shape.room
    assert [t.id for t in run_turns] == [t.id for t in reversed(newest[:count])]
    if run_turns:
        assert run_turns[0].role == "assistant"
    assert window.omission.omitted == shape.end - count
    first = window.messages()[0]
    assert first["role"] == "user"
    marker = first["content"][-1]["text"]
    if shape.end - count:
        assert marker.endswith(f"… {shape.end - count} messages of this exchange omitted …")


@given(histories(), limits())
@PROPERTY
def test_the_floor_is_kept_where_it_fits_and_the_budget_holds_beyond_it(history, lim):
    window = run(history, lim)
    newest = history[::-1]
    shape = expected_shape(newest, lim)
    if shape.long_exchange:
        count = window.kept - (1 if shape.question is not None else 0)
        if shape.floor_held:
            assert count >= shape.floor_run
        else:
            assert count == shape.floor_run
        if count > shape.floor_run:
            assert window.estimated_tokens <= lim.max_tokens
        return
    floor, gave_up = floor_of(newest, lim)
    if gave_up:
        assert window.kept == floor
    else:
        assert window.kept >= floor
    if window.kept > floor:
        assert window.estimated_tokens <= lim.max_tokens


@given(histories(), limits())
@PROPERTY
def test_the_window_is_maximal(history, lim):
    window = run(history, lim)
    newest = history[::-1]
    shape = expected_shape(newest, lim)
    tokens_of = [estimate_turn_tokens(trim_turn(t, lim.trim)) for t in newest]
    if shape.long_exchange:
        count = window.kept - (1 if shape.question is not None else 0)
        edges = [r for r in range(count + 1, shape.room + 1) if newest[r - 1].role == "assistant"]
        if not shape.floor_held or not edges:
            return
        # One more step back, to the next answer, would break the budget (the cap is `room`).
        question = (
            []
            if shape.question is None
            else list(trim_turn(newest[shape.question], lim.trim).content)
        )
        omission = ExchangeOmission(shape.end - edges[0], shape.question is not None)
        opening = estimate_content_tokens([*question, omission.block()])
        assert sum(tokens_of[: edges[0]]) + opening > lim.max_tokens
        return
    _, gave_up = floor_of(newest, lim)
    older = newest[window.kept :]
    edge = next((i for i, t in enumerate(older) if t.is_question), None)
    if gave_up or edge is None:
        return
    exchange_tokens = sum(tokens_of[window.kept : window.kept + edge + 1])
    assert (
        window.kept + edge + 1 > lim.max_messages
        or window.estimated_tokens + exchange_tokens > lim.max_tokens
    )


@given(histories(), limits())
@PROPERTY
def test_the_reported_figures_are_those_of_the_history_messages(history, lim):
    window = run(history, lim)
    messages = window.messages()
    assert window.estimated_tokens == sum(estimate_content_tokens(m["content"]) for m in messages)
    originals = {t.id: t for t in history}
    changed = [t for t in window.turns if t.content != originals[t.id].content]
    assert window.trimmed == len(changed)
    for trimmed in changed:
        assert estimate_turn_tokens(originals[trimmed.id]) > lim.trim.max_message_tokens
    kept_ids = {t.id for t in window.turns}
    assert not kept_ids & {t.id for t in window.passed_over}


@given(histories(), limits())
@PROPERTY
def test_the_window_reads_the_cap_and_one_or_back_to_the_long_exchanges_question(history, lim):
    reader = CountingReader(history)
    lazy = build_window(reader, lim)
    shape = expected_shape(history[::-1], lim)
    if shape.long_exchange:
        assert reader.pulled == (len(history) if shape.question is None else shape.question + 1)
    else:
        assert reader.pulled <= lim.max_messages + 1
    assert [t.id for t in lazy.turns] == [t.id for t in run(history, lim).turns]


@st.composite
def fragments(
    draw: st.DrawFn,
) -> tuple[list[Turn], WindowLimits, list[dict[str, Any]], str | None, CachePoints]:
    recorded = draw(tool_conversations())
    current = draw(contact_messages(pending_calls(recorded)))
    memory = draw(st.sampled_from([None, "Counsel asked about clause 7."]))
    cache = draw(st.sampled_from(EVERY_CACHE_POINTS))
    return as_turns(recorded, T0), draw(limits()), current, memory, cache


@given(fragments())
@PROPERTY
def test_every_fragment_is_valid_for_converse(drawn):
    history, lim, current, memory, cache = drawn
    window = run(history, lim)
    fragment = converse_fragment(
        window.messages(), {"role": "user", "content": current}, memory, cache
    )
    assert_valid_for_converse(fragment.as_json())
    # The current message is never trimmed: each of its blocks reaches the model whole,
    # only results that answer nothing left out.
    last = fragment.messages[-1]["content"]
    for block in current:
        if "text" in block:
            assert block in last


@given(fragments())
@PROPERTY
def test_every_repair_is_counted_and_none_is_made_without_need(drawn):
    history, lim, current, _, cache = drawn
    window = run(history, lim)
    merged = merged_by_role([*window.messages(), {"role": "user", "content": current}])
    fragment = converse_fragment(
        window.messages(), {"role": "user", "content": current}, None, cache
    )
    assert bool(fragment.repairs) == bool(converse_problems({"messages": merged}))
    kinds = [r.kind for r in fragment.repairs]

    def blocks(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
        return [b for m in messages for b in m["content"] if kind in b]

    results_out = blocks(fragment.messages, "toolResult")
    synthetic = [
        r for r in results_out if r["toolResult"]["content"] == [{"text": NO_RESULT_RECORDED}]
    ]
    assert len(synthetic) == kinds.count("missing_tool_result")
    assert all(r["toolResult"]["status"] == "error" for r in synthetic)
    left_out = len(blocks(merged, "toolResult")) - (len(results_out) - len(synthetic))
    assert left_out == kinds.count("orphan_tool_result") + kinds.count("duplicate_tool_result")
    calls_left_out = len(blocks(merged, "toolUse")) - len(blocks(fragment.messages, "toolUse"))
    assert calls_left_out == kinds.count("duplicate_tool_use")
    assert reordered(merged) == kinds.count("tool_results_moved_first")


def reordered(merged: list[dict[str, Any]]) -> int:
    """User messages where a result that answers the call before it follows other content."""
    count = 0
    for index, message in enumerate(merged):
        before = merged[index - 1] if index else {"content": []}
        asked = {b["toolUse"]["toolUseId"] for b in before["content"] if "toolUse" in b}
        seen_other, answered, late = False, set(), False
        for block in message["content"]:
            if "toolResult" not in block:
                seen_other = True
                continue
            tool_use_id = block["toolResult"]["toolUseId"]
            if message["role"] == "user" and tool_use_id in asked and tool_use_id not in answered:
                answered.add(tool_use_id)
                late = late or seen_other
        count += late
    return count


MARKER = re.compile(r"… (\d+) tokens omitted …")


def _longest_head(text: str, units: int) -> int:
    """How many characters of `text`, from its start, cost at most `units`: one at a time."""
    kept = 0
    for character in text:
        units -= text_units(character)
        if units < 0:
            break
        kept += 1
    return kept


@given(st.text(min_size=0, max_size=12_000), st.integers(2, 3000))
def test_a_trim_keeps_the_ends_and_owns_up_to_exactly_what_it_cut(body, max_tokens):
    shape = TrimShape.for_budget(max_tokens)
    trimmed = trim_text(body, shape)
    head_units, tail_units = tokens_to_units(shape.head_tokens), tokens_to_units(shape.tail_tokens)
    if estimate_tokens(body) <= max_tokens or text_units(body) <= head_units + tail_units:
        assert trimmed == body
        return
    head = _longest_head(body, head_units)
    tail = len(body) - _longest_head(body[::-1], tail_units)
    markers = MARKER.findall(trimmed)
    assert len(markers) == 1
    assert trimmed.startswith(body[:head])
    assert trimmed.endswith(body[tail:])
    assert int(markers[0]) == estimate_tokens(body[head:tail])


def _texts_of(block: Mapping[str, Any]) -> list[str]:
    """The trimmable texts of a block, as the trim sees them (JSON text for JSON)."""
    if "text" in block:
        return [block["text"]]
    if "toolUse" in block:
        tool_input = block["toolUse"]["input"]
        if set(tool_input) == {TRIMMED_INPUT_KEY}:
            return [tool_input[TRIMMED_INPUT_KEY]]
        return [_json(tool_input)]
    return [
        item["text"] if "text" in item else _json(item["json"])
        for item in block["toolResult"]["content"]
    ]


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@given(histories(), st.integers(2, 3000))
@PROPERTY
def test_a_message_of_any_blocks_keeps_its_ends_and_each_cut_owns_up_to_what_it_lost(
    history, max_tokens
):
    shape = TrimShape.for_budget(max_tokens)
    for original in history:
        trimmed = trim_turn(original, shape)
        if trimmed is original:
            continue
        assert len(trimmed.content) == len(original.content)
        whole = "".join(text for block in original.content for text in _texts_of(block))
        kept_head = whole[: _longest_head(whole, tokens_to_units(shape.head_tokens))]
        kept_tail = whole[
            len(whole) - _longest_head(whole[::-1], tokens_to_units(shape.tail_tokens)) :
        ]
        pieces: list[str] = []
        for before, after in zip(original.content, trimmed.content, strict=True):
            for key in ("toolUse", "toolResult"):
                if key in before:
                    assert after[key]["toolUseId"] == before[key]["toolUseId"]
            if "toolUse" in before:
                assert after["toolUse"]["name"] == before["toolUse"]["name"]
            for was, now in zip(_texts_of(before), _texts_of(after), strict=True):
                found = MARKER.search(now)
                if not found:
                    assert now == was
                    pieces.append(now)
                    continue
                head = now[: found.start()].removesuffix("\n")
                tail = now[found.end() :].removeprefix("\n")
                assert was.startswith(head)
                assert was.endswith(tail)
                assert int(found.group(1)) == estimate_tokens(was[len(head) : len(was) - len(tail)])
                pieces.append(head + tail)
        assert "".join(pieces) == kept_head + kept_tail
