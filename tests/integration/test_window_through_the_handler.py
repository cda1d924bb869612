"""Seed 000's window cases, through the handler and the store."""

import itertools
import json
from datetime import timedelta

from memory_core.converse_shape import CACHE_POINT
from tests.integration.conftest import minutes_ago


def conversation(api, pairs, question_chars=40, answer_chars=40, **where):
    where.setdefault("tenant", "roomy")
    start = minutes_ago(2 * pairs + 5)
    for n in range(pairs):
        api.converse(
            f"{n}:" + "q" * question_chars, sent_at=start + timedelta(minutes=2 * n), **where
        )
        api.reply(
            f"{n}:" + "a" * answer_chars, sent_at=start + timedelta(minutes=2 * n + 1), **where
        )


def test_a_long_conversation_is_bounded_to_whole_pairs_starting_on_a_question(api):
    conversation(api, 30)
    status, body = api.converse("the current question", tenant="roomy")
    assert status == 200
    history = body["history"]
    assert len(history) == 24
    assert history[0]["role"] == "user"
    assert [m["role"] for m in history] == ["user", "assistant"] * 12
    assert body["window"]["kept"] == 24
    assert body["window"]["dropped"] == 60 - 24
    # Each is "<n>:" and 40 letters: 32 units a digit, 16 the colon, 13 a letter.
    texts = [m["content"][0]["text"] for m in history]
    assert body["window"]["estimatedTokens"] == sum(
        -(-(32 * len(text.split(":")[0]) + 16 + 40 * 13) // 64) for text in texts
    )


def test_the_converse_fragment_is_history_then_current_with_roles_alternating(api):
    conversation(api, 3)
    _, body = api.converse("now", tenant="roomy")
    messages = body["converse"]["messages"]
    # The history, then the tenant's default cache point after it (SPEC 5, prompt caching).
    assert messages[-2]["content"][-1] == CACHE_POINT
    last_of_history = {**messages[-2], "content": messages[-2]["content"][:-1]}
    assert [*messages[:-2], last_of_history] == body["history"]
    assert messages[-1] == body["current"]
    roles = [m["role"] for m in messages]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert body["converse"]["system"] == []
    assert CACHE_POINT == {"cachePoint": {"type": "default"}}


def test_a_long_history_message_reaches_the_model_trimmed_with_its_marker(api):
    api.converse("paste", sent_at=minutes_ago(10))
    # 400 tokens of letters are 1,969 (25,597 units; one more is over); the 6,400 M's
    # between the head and the tail are 83,200 units, 1,300 tokens.
    api.reply("H" * 1969 + "M" * 6400 + "T" * 1969, sent_at=minutes_ago(9))
    _, body = api.converse("what did the clause say?")
    answer = body["history"][1]["content"][0]["text"]
    assert answer == "H" * 1969 + "\n… 1300 tokens omitted …\n" + "T" * 1969
    assert body["window"]["trimmed"] == 1


def test_the_current_message_is_never_trimmed_even_at_40000_characters(api):
    api.converse("earlier", sent_at=minutes_ago(3))
    pasted = "clause 7.2 " * 3700
    assert len(pasted) >= 40_000
    status, body = api.converse(pasted)
    assert status == 200
    assert body["current"]["content"] == [{"text": pasted}]
    assert body["converse"]["messages"][-1]["content"][-1] == {"text": pasted}
    stored = [i for i in api.turn_items() if json.loads(i["content"]["S"]) == [{"text": pasted}]]
    assert len(stored) == 1


def test_the_floor_is_kept_when_ten_messages_alone_exceed_the_budget(api):
    conversation(api, 15, question_chars=3600, answer_chars=3600)
    _, body = api.converse("so?", tenant="roomy")
    assert body["window"]["kept"] == 10
    assert body["window"]["estimatedTokens"] > 4000
    assert body["history"][0]["role"] == "user"


def test_tool_use_and_tool_result_travel_together(api):
    api.converse("look up clause 7", sent_at=minutes_ago(10))
    call = {"toolUse": {"toolUseId": "t1", "name": "clauses", "input": {"n": 7}}}
    status, _ = api.request(
        "POST",
        "/v1/tenants/acme/contacts/c1/turns",
        {"role": "assistant", "content": [call]},
    )
    assert status == 201
    result = {"toolResult": {"toolUseId": "t1", "content": [{"json": {"text": "7. Fees"}}]}}
    status, _ = api.request(
        "POST", "/v1/tenants/acme/contacts/c1/turns", {"role": "user", "content": [result]}
    )
    assert status == 201
    api.reply("Clause 7 is about fees.")
    _, body = api.converse("thanks; and clause 8?")
    history = body["history"]
    assert [next(iter(m["content"][0])) for m in history] == [
        "text",
        "toolUse",
        "toolResult",
        "text",
    ]
    assert history[1]["content"][0]["toolUse"]["input"] == {"n": 7}
