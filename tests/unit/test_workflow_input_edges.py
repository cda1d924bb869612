"""The workflow's model input at its edges: each limit exactly met and one byte over."""

from __future__ import annotations

from typing import Any

from memory_core.converse_shape import sdk_member_names
from memory_core.workflow_input import (
    ModelInput,
    current_fits,
    json_bytes,
    model_input,
    omitted_for_size_marker,
)
from tests.unit.conversation_builders import text

# Step Functions' 256 KiB state less the 8 KiB kept for the ids, the decision and a Catch's
# error: what the model's input may take when no other limit is given.
DEFAULT_LIMIT = 256 * 1024 - 8 * 1024
NOW = [text("now")]


def _fragment_of(size: int) -> dict[str, Any]:
    """One exchange and the current message, exactly `size` bytes as the model's input."""

    def fragment(characters: int) -> dict[str, Any]:
        return {
            "system": [],
            "messages": [
                {"role": "user", "content": [text("a" * characters)]},
                {"role": "assistant", "content": [text("b")]},
                {"role": "user", "content": NOW},
            ],
        }

    unpadded = model_input(fragment(0), NOW, 10**9).size
    padded = fragment(size - unpadded)
    assert model_input(padded, NOW, 10**9).size == size
    return padded


def test_by_default_a_fragment_of_exactly_248_kib_is_given_whole():
    fragment = _fragment_of(DEFAULT_LIMIT)
    fitted = model_input(fragment, NOW)
    assert (fitted.omitted_messages, fitted.memory_omitted) == (0, False)
    assert fitted.size == DEFAULT_LIMIT == 253_952


def test_by_default_one_byte_over_248_kib_the_oldest_exchange_goes():
    fragment = _fragment_of(DEFAULT_LIMIT + 1)
    fitted = model_input(fragment, NOW)
    assert fitted.omitted_messages == 2
    assert fitted.messages == [
        {"Role": "user", "Content": [{"Text": omitted_for_size_marker(2, False)}, {"Text": "now"}]}
    ]


def _current_of(size: int) -> dict[str, Any]:
    """A current message that, with the widest marker, is exactly `size` bytes of input."""
    # The widest marker: a ten-digit count (more than any omission reaches) and the summary.
    widest = (
        "… 1000000000 earlier messages and the conversation's summary"
        " omitted to fit the workflow's 256 KiB state …"
    )

    def alone(characters: int) -> int:
        marked = {"Role": "user", "Content": [{"Text": widest}, {"Text": "c" * characters}]}
        return json_bytes({"System": [], "Messages": [marked]})

    characters = size - alone(0)
    assert alone(characters) == size
    return {"role": "user", "content": [text("c" * characters)]}


def test_the_current_message_fits_with_room_for_a_ten_digit_count_and_the_summary():
    current = _current_of(30_000)
    assert current_fits(current, 30_000)
    assert not current_fits(current, 29_999)


def test_by_default_a_current_message_fits_up_to_exactly_248_kib_with_the_marker():
    assert current_fits(_current_of(DEFAULT_LIMIT))
    assert not current_fits(_current_of(DEFAULT_LIMIT + 1))


def test_the_marker_names_what_went_in_words():
    state = "omitted to fit the workflow's 256 KiB state …"
    assert omitted_for_size_marker(1, False) == f"… 1 earlier message {state}"
    assert omitted_for_size_marker(2, False) == f"… 2 earlier messages {state}"
    assert omitted_for_size_marker(0, True) == f"… the conversation's summary {state}"
    assert omitted_for_size_marker(1, True) == (
        f"… 1 earlier message and the conversation's summary {state}"
    )
    assert omitted_for_size_marker(3, True) == (
        f"… 3 earlier messages and the conversation's summary {state}"
    )


def test_a_model_input_built_with_nothing_said_left_out_has_nothing_left_out():
    built = ModelInput(system=[], messages=[{"Role": "user", "Content": [{"Text": "now"}]}])
    assert (built.omitted_messages, built.memory_omitted) == (0, False)
    assert built.as_json() == {"System": [], "Messages": built.messages}


def _size(system: list[dict[str, Any]], messages: list[dict[str, Any]]) -> int:
    """The size of a model input given in Converse names."""
    return json_bytes({"System": sdk_member_names(system), "Messages": sdk_member_names(messages)})


def _marked(omitted: int, memory: bool, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [text(omitted_for_size_marker(omitted, memory)), *blocks]}


def test_an_exchange_goes_only_while_the_rest_with_its_marker_is_over_the_limit():
    oldest_kept = text("c" * 300)
    kept: list[dict[str, Any]] = [
        {"role": "user", "content": [oldest_kept]},
        {"role": "assistant", "content": [text("d")]},
        {"role": "user", "content": NOW},
    ]
    fragment = {
        "system": [],
        "messages": [
            {"role": "user", "content": [text("a" * 3000)]},
            {"role": "assistant", "content": [text("b")]},
            *kept,
        ],
    }
    shortened = [_marked(2, False, oldest_kept), *kept[1:]]
    limit = _size([], shortened)
    at_limit = model_input(fragment, NOW, limit)
    assert (at_limit.omitted_messages, at_limit.memory_omitted) == (2, False)
    assert at_limit.messages == sdk_member_names(shortened)
    assert at_limit.size == limit
    over = model_input(fragment, NOW, limit - 1)
    assert over.omitted_messages == 4
    assert over.messages == sdk_member_names([_marked(4, False, *NOW)])


def test_the_memory_stays_when_the_rest_with_its_marker_is_exactly_at_the_limit():
    system: list[dict[str, Any]] = [{"text": "summary " * 100}, {"cachePoint": {"type": "default"}}]
    fragment = {
        "system": system,
        "messages": [
            {"role": "user", "content": [text("a" * 3000)]},
            {"role": "assistant", "content": [text("b")]},
            {"role": "user", "content": NOW},
        ],
    }
    limit = _size(system, [_marked(2, False, *NOW)])
    at_limit = model_input(fragment, NOW, limit)
    assert (at_limit.system, at_limit.omitted_messages) == (sdk_member_names(system), 2)
    assert not at_limit.memory_omitted
    assert at_limit.messages == sdk_member_names([_marked(2, False, *NOW)])
    over = model_input(fragment, NOW, limit - 1)
    assert (over.system, over.omitted_messages, over.memory_omitted) == ([], 2, True)
    assert over.messages == sdk_member_names([_marked(2, True, *NOW)])


def test_a_merged_question_loses_blocks_only_while_over_the_limit():
    fragment = {
        "system": [],
        "messages": [{"role": "user", "content": [text("x" * 3000), text("y"), *NOW]}],
    }
    limit = _size([], [_marked(1, False, text("y"), *NOW)])
    at_limit = model_input(fragment, NOW, limit)
    assert at_limit.omitted_messages == 1
    assert at_limit.messages == sdk_member_names([_marked(1, False, text("y"), *NOW)])
    over = model_input(fragment, NOW, limit - 1)
    assert over.omitted_messages == 2
    assert over.messages == sdk_member_names([_marked(2, False, *NOW)])


def test_a_question_repeating_the_current_message_goes_as_the_current_one_stays_once():
    # The unanswered question said "now" too: one "now" is the current message's, the other
    # is history, and goes like any other block.
    fragment = {
        "system": [],
        "messages": [{"role": "user", "content": [*NOW, text("x" * 3000), *NOW]}],
    }
    fitted = model_input(fragment, NOW, _size([], [_marked(2, False, *NOW)]))
    assert fitted.omitted_messages == 2
    assert fitted.messages == sdk_member_names([_marked(2, False, *NOW)])


def test_a_cache_point_goes_with_the_last_block_before_it_and_stays_while_one_is_left():
    cache = {"cachePoint": {"type": "default"}}
    alone = {
        "system": [],
        "messages": [{"role": "user", "content": [text("x" * 3000), cache, *NOW]}],
    }
    fitted = model_input(alone, NOW, _size([], [_marked(1, False, *NOW)]))
    assert fitted.omitted_messages == 1
    assert fitted.messages == sdk_member_names([_marked(1, False, *NOW)])

    after_one = {
        "system": [],
        "messages": [{"role": "user", "content": [text("x" * 3000), text("q"), cache, *NOW]}],
    }
    kept = _marked(1, False, text("q"), cache, *NOW)
    fitted = model_input(after_one, NOW, _size([], [kept]))
    assert fitted.omitted_messages == 1
    assert fitted.messages == sdk_member_names([kept])


def test_the_current_messages_block_is_told_by_its_content_whatever_its_members_order():
    sent = {"document": {"format": "txt", "name": "notes", "source": {"bytes": "bm90ZXM="}}}
    stored = {"document": {"source": {"bytes": "bm90ZXM="}, "name": "notes", "format": "txt"}}
    fragment = {
        "system": [],
        "messages": [{"role": "user", "content": [text("x" * 3000), stored, *NOW]}],
    }
    fitted = model_input(fragment, [sent, *NOW], 200)
    assert fitted.omitted_messages == 1
    assert fitted.messages == sdk_member_names([_marked(1, False, stored, *NOW)])


def test_a_cache_point_between_a_question_and_the_same_words_goes_with_the_question():
    # The contact said "now" twice: the first is history, behind the point after the history;
    # the second is the current message, and a current message that fits alone fits unmarked
    # by the point, which marks a prefix of a history no longer there.
    cache = {"cachePoint": {"type": "default", "ttl": "1h"}}
    fragment = {
        "system": [text("m" * 500)],
        "messages": [{"role": "user", "content": [*NOW, cache, *NOW]}],
    }
    smallest_accepted = _size([], [_marked(10**9, True, *NOW)])
    assert current_fits({"role": "user", "content": NOW}, smallest_accepted)
    fitted = model_input(fragment, NOW, smallest_accepted)
    assert fitted.size <= smallest_accepted
    assert (fitted.omitted_messages, fitted.memory_omitted) == (1, True)
    assert fitted.messages == sdk_member_names([_marked(1, True, *NOW)])


def test_a_cache_point_after_a_current_result_moved_first_goes_with_the_history_after_it():
    # The repairs put the current message's tool result before the question it was merged
    # into; the point before the question goes with the question.
    cache = {"cachePoint": {"type": "default"}}
    result = text("[tool result t2]\nfound")
    fragment = {
        "system": [],
        "messages": [{"role": "user", "content": [result, cache, text("x" * 3000)]}],
    }
    fitted = model_input(fragment, [result], _size([], [_marked(1, False, result)]))
    assert fitted.omitted_messages == 1
    assert fitted.messages == sdk_member_names([_marked(1, False, result)])
