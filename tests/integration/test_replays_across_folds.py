"""A retried message is answered as it first was, memory included, though a fold landed since."""

from __future__ import annotations

from datetime import timedelta

from tests.integration.conftest import TABLE, log_lines, minutes_ago, request_record
from tests.integration.test_compactor import run

TENANT = "roomy"


def exchange(api, n, at):
    api.converse(f"question {n}: " + "q" * 400, tenant=TENANT, sent_at=at)
    api.reply(f"answer {n}: " + "a" * 400, tenant=TENANT, sent_at=at + timedelta(seconds=30))


def fold(api, compactor, name):
    assert run(compactor, request_record(TENANT, "c1", name)) == {"batchItemFailures": []}


def ask(api, message_id, at):
    return api.converse("and the fees?", tenant=TENANT, message_id=message_id, sent_at=at)


M1_AT = timedelta(minutes=20)


def exchanges(api, start, numbers, offset=timedelta(0)):
    for n in numbers:
        exchange(api, n, start + offset + timedelta(minutes=n))


def m1_between_two_folds(api):
    """m1 answered after the first fold; the second fold takes m1 and later turns in."""
    start = minutes_ago(120)
    exchanges(api, start, range(12))
    compactor = api.compactor()
    fold(api, compactor, "first")
    first = ask(api, "m1", start + M1_AT)
    exchanges(api, start, range(12, 24), offset=timedelta(minutes=10))
    fold(api, compactor, "second")
    return start, first


def test_a_replay_after_a_fold_answers_with_the_memory_of_the_first_answer(api):
    start, first = m1_between_two_folds(api)
    assert first[0] == 200
    assert first[1]["memory"]["turnsFolded"] == 24
    assert api.state(TENANT)["foldVersion"]["N"] == "2"
    newer = api.converse("something new", tenant=TENANT)[1]["memory"]
    assert newer["turnsFolded"] > first[1]["memory"]["turnsFolded"]  # the fold took m1 in

    again = ask(api, "m1", start + M1_AT)
    assert again == first
    assert "and the fees?" not in again[1]["memory"]["summary"]


def test_a_message_first_answered_without_memory_is_replayed_without_it(api):
    start = minutes_ago(120)
    exchanges(api, start, range(12))
    first = ask(api, "m1", start + timedelta(minutes=13))
    assert first[1]["memory"] is None
    fold(api, api.compactor(), "first")
    assert api.converse("later", tenant=TENANT)[1]["memory"] is not None
    assert ask(api, "m1", start + timedelta(minutes=13)) == first


def test_a_replay_before_any_new_fold_reads_nothing_more(api):
    start = minutes_ago(120)
    exchanges(api, start, range(12))
    fold(api, api.compactor(), "first")
    first = ask(api, "m1", start + M1_AT)
    reads: list[str] = []
    client = api.handler.SERVICE._store._client
    client.meta.events.register("before-call.dynamodb", lambda model, **_: reads.append(model.name))
    assert ask(api, "m1", start + M1_AT) == first
    # The memory served is still the current one: no read of a kept memory.
    assert reads == ["Query", "TransactWriteItems", "Query"]


def test_a_memory_that_can_no_longer_be_found_is_left_out_and_logged(api, logs):
    start, first = m1_between_two_folds(api)
    api.dynamodb.delete_item(
        TableName=TABLE,
        Key={"PK": {"S": f"TENANT#{TENANT}#CONTACT#c1"}, "SK": {"S": "FOLD#000000000001"}},
    )
    status, again = ask(api, "m1", start + M1_AT)
    assert status == 200
    assert again["memory"] is None
    assert again["converse"]["system"] == []
    assert {k: v for k, v in again.items() if k not in ("memory", "converse")} == {
        k: v for k, v in first[1].items() if k not in ("memory", "converse")
    }
    missing = [
        line for line in log_lines(logs.getvalue()) if line["message"] == "replay_memory_missing"
    ]
    assert [line["memoryVersion"] for line in missing] == [1]


def test_a_marker_from_before_memory_versions_replays_with_the_current_memory(api):
    start = minutes_ago(120)
    exchanges(api, start, range(12))
    fold(api, api.compactor(), "first")
    first = ask(api, "m1", start + M1_AT)
    api.dynamodb.update_item(
        TableName=TABLE,
        Key={"PK": {"S": f"TENANT#{TENANT}#CONTACT#c1"}, "SK": {"S": "MSGID#m1"}},
        UpdateExpression="REMOVE memoryVersion",
    )
    assert ask(api, "m1", start + M1_AT) == first
