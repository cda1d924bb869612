"""The workflow's model input: tools as text, within Step Functions' state, honest about it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memory_core.converse_shape import converse_fragment, sdk_member_names
from memory_core.workflow_input import (
    MODEL_INPUT_LIMIT_BYTES,
    STATE_LIMIT_BYTES,
    current_fits,
    json_bytes,
    model_input,
    omitted_for_size_marker,
    tools_as_text,
)
from tests.support.bedrock_stand_in import converse_names
from tests.support.converse_validator import assert_valid_for_converse
from tests.support.tool_conversations import (
    as_turns,
    contact_messages,
    pending_calls,
    tool_conversations,
)
from tests.unit.conversation_builders import EVERY_CACHE_POINTS, text, tool_use, window_of

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def as_converse(fitted: Any) -> dict[str, Any]:
    return {"system": converse_names(fitted.system), "messages": converse_names(fitted.messages)}


@st.composite
def fragments(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Converse fragment built as the service builds it (window, merge, repairs), and the
    current message's blocks."""
    recorded = draw(tool_conversations(max_exchanges=4))
    history = window_of(as_turns(recorded, T0)).messages()
    current = draw(contact_messages(pending_calls(recorded)))
    unanswered = history[-1]["content"] if history and history[-1]["role"] == "user" else []
    said = [block for block in unanswered if "text" in block]
    repeats: bool = draw(st.booleans())
    if said and repeats:
        # The contact says again what went unanswered ("hello?", "hello?"): equal blocks on
        # both sides of the point after the history.
        current = [*current, draw(st.sampled_from(said))]
    memory = draw(st.one_of(st.none(), st.text(min_size=1, max_size=400).filter(str.strip)))
    cache = draw(st.sampled_from(EVERY_CACHE_POINTS))
    fragment = converse_fragment(history, {"role": "user", "content": current}, memory, cache)
    return fragment.as_json(), current


def test_tool_calls_and_results_become_text_naming_the_call():
    messages = [
        {"role": "user", "content": [text("Which cases mention clause 8?")]},
        {
            "role": "assistant",
            "content": [text("Looking."), tool_use("t1", "search_cases", clause=8)],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "content": [{"text": "case 12; case 40"}],
                        "status": "error",
                    }
                },
                text("and clause 9?"),
            ],
        },
    ]
    rendered = tools_as_text(messages)
    assert rendered[1]["content"] == [
        {"text": "Looking."},
        {"text": '[tool call t1: search_cases]\n{"clause":8}'},
    ]
    assert rendered[2]["content"][0] == {"text": "[tool result t1 (error)]\ncase 12; case 40"}
    assert rendered[2]["content"][1] == {"text": "and clause 9?"}
    assert rendered[0] == messages[0]


def test_a_json_result_is_shown_as_its_compact_json():
    result = {"toolResult": {"toolUseId": "t2", "content": [{"json": {"ok": True, "ja": "条"}}]}}
    assert _as_text_of(result) == '[tool result t2]\n{"ok":true,"ja":"条"}'


def _as_text_of(block: dict[str, Any]) -> str:
    rendered = tools_as_text([{"role": "user", "content": [block]}])
    return str(rendered[0]["content"][0]["text"])


@given(fragments())
def test_with_tools_as_text_every_fragment_is_valid_without_a_tool_config(drawn):
    fragment, _current = drawn
    rendered = tools_as_text(fragment["messages"])
    assert [m["role"] for m in rendered] == [m["role"] for m in fragment["messages"]]
    blocks = [block for message in rendered for block in message["content"]]
    assert all(set(block) <= {"text", "cachePoint"} for block in blocks)
    everything = "\n".join(block.get("text", "") for block in blocks)
    for message in fragment["messages"]:
        for block in message["content"]:
            if "toolUse" in block:
                assert f"[tool call {block['toolUse']['toolUseId']}: " in everything
            if "toolResult" in block:
                assert f"[tool result {block['toolResult']['toolUseId']}" in everything
    assert_valid_for_converse({"system": fragment["system"], "messages": rendered})


@given(fragments())
def test_a_fragment_that_fits_is_given_whole(drawn):
    fragment, current = drawn
    fitted = model_input(fragment, current)
    whole = sdk_member_names(tools_as_text(fragment["messages"]))
    if json_bytes({"System": sdk_member_names(fragment["system"]), "Messages": whole}) <= (
        MODEL_INPUT_LIMIT_BYTES
    ):
        assert fitted.messages == whole
        assert (fitted.omitted_messages, fitted.memory_omitted) == (0, False)


def _smallest_limit_accepting(current: list[dict[str, Any]]) -> int:
    low, high = 0, 10**7
    while low < high:
        middle = (low + high) // 2
        if current_fits({"role": "user", "content": current}, middle):
            high = middle
        else:
            low = middle + 1
    return low


@st.composite
def fragments_with_limits(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """A fragment, its current message's blocks, and a limit: anywhere, or within 64 bytes
    of the smallest at which the current message is accepted, where every block but the
    current message's must go, and a cache point's bytes decide."""
    fragment, current = draw(fragments())
    smallest = _smallest_limit_accepting(current)
    limit = draw(st.one_of(st.integers(200, 120_000), st.integers(smallest, smallest + 64)))
    return fragment, current, limit


@given(fragments_with_limits())
def test_over_the_limit_the_oldest_go_first_with_a_true_count_and_the_current_stays(drawn):
    fragment, current, limit = drawn
    fitted = model_input(fragment, current, limit)
    rendered = sdk_member_names(tools_as_text(fragment["messages"]))
    assert_valid_for_converse(as_converse(fitted))
    # The current message's blocks (those the repairs kept) stay, whole, whatever the limit.
    for block in sdk_member_names(tools_as_text([{"role": "user", "content": current}]))[0][
        "Content"
    ]:
        if block in rendered[-1]["Content"]:
            assert block in fitted.messages[-1]["Content"]
    if current_fits({"role": "user", "content": current}, limit):
        assert fitted.size <= limit
    if not fitted.omitted_messages and not fitted.memory_omitted:
        assert fitted.messages == rendered
        return
    marker = omitted_for_size_marker(fitted.omitted_messages, fitted.memory_omitted)
    assert fitted.messages[0]["Content"][0] == {"Text": marker}
    assert fitted.memory_omitted == (fitted.system == [] and fragment["system"] != [])
    # What stays is the newest messages as they were, the last perhaps without some of
    # its older blocks, nothing rearranged.
    kept = [fitted.messages[0]["Content"][1:], *(m["Content"] for m in fitted.messages[1:])]
    newest = [m["Content"] for m in rendered[len(rendered) - len(kept) :]]
    assert kept[:-1] == newest[:-1]
    assert _in_order_within(kept[-1], newest[-1])
    # A cache point is no message: it is not counted when it goes with the blocks before it.
    dropped_blocks = len(_no_cache_points(newest[-1])) - len(_no_cache_points(kept[-1]))
    assert fitted.omitted_messages == len(rendered) - len(kept) + dropped_blocks


def _no_cache_points(blocks: list[Any]) -> list[Any]:
    return [block for block in blocks if "CachePoint" not in block]


def _in_order_within(part: list[Any], whole: list[Any]) -> bool:
    remaining = iter(whole)
    return all(any(block == other for other in remaining) for block in part)


def _long_fragment(messages: int, characters: int) -> dict[str, Any]:
    history = [
        {"role": "user" if index % 2 == 0 else "assistant", "content": [text("条" * characters)]}
        for index in range(messages)
    ]
    return {"system": [], "messages": [*history, {"role": "user", "content": [text("次は?")]}]}


def test_exactly_at_the_limit_nothing_is_left_out_and_one_byte_over_the_oldest_exchange_goes():
    fragment = _long_fragment(6, 1000)
    whole = model_input(fragment, [text("次は?")], 10**9)
    assert model_input(fragment, [text("次は?")], whole.size).messages == whole.messages
    shortened = model_input(fragment, [text("次は?")], whole.size - 1)
    assert shortened.omitted_messages == 2
    assert shortened.messages[0]["Content"][0] == {"Text": omitted_for_size_marker(2, False)}
    assert shortened.messages[1:] == whole.messages[3:]


def test_the_memory_goes_only_when_the_history_alone_cannot_make_room():
    fragment = {
        "system": [{"text": "summary " * 4000}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [text("a" * 200)]}],
    }
    whole = model_input(fragment, [text("a" * 200)], 10**9)
    assert model_input(fragment, [text("a" * 200)], whole.size).system == whole.system
    without = model_input(fragment, [text("a" * 200)], whole.size - 1)
    assert (without.system, without.memory_omitted, without.omitted_messages) == ([], True, 0)
    assert without.messages[0]["Content"][0] == {"Text": omitted_for_size_marker(0, True)}


def test_an_unanswered_question_merged_before_the_current_message_goes_block_by_block():
    fragment = {
        "system": [],
        "messages": [{"role": "user", "content": [text("x" * 5000), text("now")]}],
    }
    whole = model_input(fragment, [text("now")], 10**9)
    fitted = model_input(fragment, [text("now")], whole.size - 1)
    assert fitted.omitted_messages == 1
    assert fitted.messages == [
        {"Role": "user", "Content": [{"Text": omitted_for_size_marker(1, False)}, {"Text": "now"}]}
    ]


def test_the_current_message_fits_exactly_at_the_limit_and_not_one_byte_over():
    current = {"role": "user", "content": [text("条" * 10_000)]}
    needed = next(limit for limit in range(30_000, 40_000) if current_fits(current, limit))
    assert not current_fits(current, needed - 1)
    assert current_fits(current, needed)


def test_the_state_limit_is_step_functions_256_kib_and_the_input_leaves_room_beside_it():
    assert STATE_LIMIT_BYTES == 262_144
    assert 0 < STATE_LIMIT_BYTES - MODEL_INPUT_LIMIT_BYTES <= 16 * 1024


def test_sizes_are_counted_in_utf8_bytes_of_compact_json():
    assert json_bytes({"Text": "条"}) == len('{"Text":""}') + 3
    assert json_bytes({"Text": "😀"}) == len('{"Text":""}') + 4
    assert json_bytes({"Text": "a\u0001"}) == len('{"Text":"a\\u0001"}')


def test_the_current_messages_results_stay_though_the_repairs_put_them_first():
    result = {"toolResult": {"toolUseId": "t1", "content": [{"text": "21"}]}}
    current = [text("now"), result]
    fragment = {
        "system": [],
        "messages": [{"role": "user", "content": [result, text("y" * 5000), text("now")]}],
    }
    whole = model_input(fragment, current, 10**9)
    fitted = model_input(fragment, current, whole.size - 1)
    assert fitted.omitted_messages == 1
    assert fitted.messages[0]["Content"] == [
        {"Text": omitted_for_size_marker(1, False)},
        {"Text": "[tool result t1]\n21"},
        {"Text": "now"},
    ]
