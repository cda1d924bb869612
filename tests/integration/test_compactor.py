"""The compactor Lambda under moto: the fold, exactly once in effect, losing nothing."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest

from adapters.conversation_store import ConversationKey
from local.proxy_events import LambdaContextStandIn
from memory_core.tokens import estimate_tokens
from tests.integration.conftest import minutes_ago, request_record

CONTEXT = LambdaContextStandIn(function_name="compactor-local")


def talk(api, pairs, chars=400, tenant="roomy", contact="c1"):
    start = api_start(api, pairs)
    for n in range(pairs):
        at = start + timedelta(minutes=2 * n)
        api.converse(f"question {n}: " + "q" * chars, tenant=tenant, contact=contact, sent_at=at)
        api.reply(
            f"answer {n}: " + "a" * chars,
            tenant=tenant,
            contact=contact,
            sent_at=at + timedelta(minutes=1),
        )


def api_start(api, pairs):
    return minutes_ago(2 * pairs + 30)


def run(compactor, *records: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = compactor.lambda_handler({"Records": list(records)}, CONTEXT)
    return answer


def turn_count(api) -> int:
    return len(api.turn_items())


def test_a_long_conversation_is_folded_and_the_next_converse_returns_the_memory(api):
    talk(api, 20)
    compactor = api.compactor()
    requests = api.received()
    assert len(requests) == 1
    assert run(compactor, *requests) == {"batchItemFailures": []}
    state = api.state("roomy")
    assert state["foldVersion"]["N"] == "1"
    folded = api.memory_item("roomy")["turnsFolded"]["N"]
    assert int(folded) >= 20
    assert "leaseUntil" not in state
    assert "foldSummary" not in state  # the memory has its own item
    _, body = api.converse("what did we cover?", tenant="roomy")
    memory = body["memory"]
    assert memory["turnsFolded"] == int(folded)
    assert "answer 19" in memory["summary"]
    assert body["converse"]["system"][0]["text"].endswith(memory["summary"])
    assert body["converse"]["system"][1] == {"cachePoint": {"type": "default"}}


def test_folding_never_deletes_or_edits_a_turn(api):
    talk(api, 15)
    before = sorted(api.turn_items(), key=lambda i: i["SK"]["S"])
    run(api.compactor(), *api.received())
    assert sorted(api.turn_items(), key=lambda i: i["SK"]["S"]) == before


def test_the_counters_drop_by_what_was_folded(api):
    talk(api, 15)
    run(api.compactor(), *api.received())
    state = api.state("roomy")
    assert state["unfoldedTokens"]["N"] == "0"
    assert state["unfoldedTurns"]["N"] == "0"


def test_a_duplicate_delivery_folds_once(api):
    talk(api, 15)
    compactor = api.compactor()
    (request,) = api.received()
    run(compactor, request)
    first = api.state("roomy")
    run(compactor, request)
    assert api.state("roomy") == {**first, **{}}
    assert api.state("roomy")["foldVersion"]["N"] == "1"


def test_each_compaction_folds_only_the_turns_newer_than_the_watermark(api):
    talk(api, 15)
    compactor = api.compactor()
    run(compactor, request_record("roomy", "c1"))
    seen: list[int] = []
    summariser = compactor.COMPACTOR._summariser
    original = summariser.summarise

    def spy(previous, turns, max_tokens):
        seen.append(len(turns))
        return original(previous, turns, max_tokens)

    summariser.summarise = spy
    api.converse("a new question", tenant="roomy")
    api.reply("a new answer", tenant="roomy")
    run(compactor, request_record("roomy", "c1", "m-2"))
    assert seen == [2]
    assert api.memory_item("roomy")["turnsFolded"]["N"] == "32"


def test_two_compactors_racing_on_one_conversation_produce_one_fold(api):
    talk(api, 15)
    first = api.compactor()
    second = api.compactor()
    summariser = first.COMPACTOR._summariser
    original = summariser.summarise

    def interleaved(previous, turns, max_tokens):
        # While the first compactor summarises, the second reads, summarises and commits.
        assert second.COMPACTOR.compact(key()).outcome.value == "folded"
        return original(previous, turns, max_tokens)

    def key():
        return ConversationKey("roomy", "c1")

    summariser.summarise = interleaved
    outcome = first.COMPACTOR.compact(key())
    assert outcome.outcome.value == "lost_race"
    state = api.state("roomy")
    assert state["foldVersion"]["N"] == "1"
    assert api.memory_item("roomy")["turnsFolded"]["N"] == "30"
    assert state["unfoldedTurns"]["N"] == "0"


def test_a_partial_batch_returns_exactly_the_failed_ids(api):
    talk(api, 8, contact="c1")
    talk(api, 8, contact="c2")
    poison = {**request_record("roomy", "c1", "poison"), "body": "not json"}
    bad_tenant = {**request_record("roomy", "c1", "bad"), "body": '{"tenantId": "a b"}'}
    answer = run(
        api.compactor(),
        request_record("roomy", "c1", "ok-1"),
        poison,
        request_record("roomy", "c2", "ok-2"),
        bad_tenant,
    )
    assert answer == {
        "batchItemFailures": [{"itemIdentifier": "poison"}, {"itemIdentifier": "bad"}]
    }
    assert api.state("roomy", "c1")["foldVersion"]["N"] == "1"
    assert api.state("roomy", "c2")["foldVersion"]["N"] == "1"


def test_a_poison_message_reaches_the_dead_letter_queue_after_the_receive_limit(api):
    api.sqs.send_message(QueueUrl=api.queue_url, MessageBody="not json")
    compactor = api.compactor()
    for _ in range(4):
        records = api.received()
        assert len(records) == 1
        assert run(compactor, *records)["batchItemFailures"]
    assert api.received() == []
    dead = api.sqs.receive_message(QueueUrl=api.dlq_url).get("Messages", [])
    assert [m["Body"] for m in dead] == ["not json"]


def test_a_request_for_a_conversation_with_nothing_to_fold_does_nothing(api):
    compactor = api.compactor()
    assert run(compactor, request_record("roomy", "nobody")) == {"batchItemFailures": []}
    assert api.state("roomy", "nobody") is None


@pytest.mark.parametrize("chars", [400, 4000])
def test_the_summary_stays_within_its_cap(api, chars):
    talk(api, 30, chars=chars)
    run(api.compactor(MEMORY_SUMMARY_MAX_TOKENS="200"), request_record("roomy", "c1"))
    summary = api.memory_item("roomy")["foldSummary"]["S"]
    assert 150 < estimate_tokens(summary) <= 200


def test_a_failed_fold_is_logged_naming_its_conversation_and_nothing_said(api, monkeypatch):
    talk(api, 8, contact="c1")
    talk(api, 8, contact="c2")
    compactor = api.compactor()

    def summarise_fails_for_c2(previous, turns, max_tokens):
        if any("c2-secret" in str(turn.content) for turn in turns):
            raise RuntimeError("the model is down")
        return original(previous, turns, max_tokens)

    api.converse("c2-secret", tenant="roomy", contact="c2")
    original = compactor.COMPACTOR._summariser.summarise
    monkeypatch.setattr(compactor.COMPACTOR._summariser, "summarise", summarise_fails_for_c2)
    stream = io.StringIO()
    previous = compactor.logger.registered_handler.setStream(stream)
    try:
        answer = run(
            compactor, request_record("roomy", "c1", "ok"), request_record("roomy", "c2", "ko")
        )
    finally:
        compactor.logger.registered_handler.setStream(previous)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "ko"}]}
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    (failed,) = [line for line in lines if line["message"] == "compaction_failed"]
    assert (failed["tenant"], failed["contact"], failed["error"]) == ("roomy", "c2", "RuntimeError")
    assert failed["level"] == "WARNING"
    (folded,) = [line for line in lines if line["message"] == "memory_folded"]
    assert (folded["tenant"], folded["contact"]) == ("roomy", "c1")
    # Keys appended for one record are gone by the next one and after the batch.
    (summary,) = [line for line in lines if line["message"] == "compaction_records_failed"]
    assert "contact" not in summary
    assert "secret" not in stream.getvalue()
