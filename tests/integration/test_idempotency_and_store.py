"""Message ids, the single-table layout, TTL and the DynamoDB round trips."""

import json
import time
from datetime import UTC, datetime, timedelta

from tests.integration.conftest import minutes_ago


def test_the_same_message_id_twice_is_stored_once_and_answered_the_same(api):
    api.converse("first", sent_at=minutes_ago(3))
    api.reply("reply", sent_at=minutes_ago(2))
    first = api.converse("the question", message_id="msg-1", sent_at=minutes_ago(1))
    items_after_first = api.items()
    again = api.converse("the question", message_id="msg-1", sent_at=minutes_ago(1))
    assert again == first
    assert api.items() == items_after_first
    assert first[1]["turnCount"] == 2


def test_a_retry_without_sent_at_gets_the_first_calls_time_and_count(api):
    _, first = api.converse("hello", message_id="msg-2")
    time.sleep(0.01)
    _status, again = api.converse("hello", message_id="msg-2")
    assert again == first
    assert len(api.turn_items()) == 1


def test_a_message_id_reused_with_other_content_is_409_and_nothing_changes(api):
    api.converse("original", message_id="msg-3")
    before = api.items()
    status, answer = api.converse("something else", message_id="msg-3")
    assert status == 409
    assert answer["error"]["code"] == "id_reused"
    assert api.items() == before


def test_a_reply_recorded_twice_is_stored_once(api):
    first = api.reply("the answer", message_id="r-1", sent_at=minutes_ago(1))
    again = api.reply("the answer", message_id="r-1", sent_at=minutes_ago(1))
    assert first[0] == again[0] == 201
    assert again[1] == first[1]
    assert len(api.turn_items()) == 1


def test_every_key_is_prefixed_by_the_tenant_and_turns_carry_a_ttl(api):
    api.converse("hello", sent_at=minutes_ago(1))
    api.converse("hello", tenant="roomy", sent_at=minutes_ago(1))
    items = api.items()
    assert {i["PK"]["S"].split("#CONTACT#")[0] for i in items} == {"TENANT#acme", "TENANT#roomy"}
    for turn in api.turn_items():
        sent = turn["sentAt"]["S"]
        assert turn["SK"]["S"].startswith(f"TURN#{sent}#")
        sent_at = datetime.strptime(sent, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        ttl = int(turn["expiresAt"]["N"])
        assert ttl - int(sent_at.timestamp()) == 60 * 86400  # historyDays past the last to see it


def test_a_turn_past_its_ttl_is_never_returned(api):
    api.converse("stale", sent_at=minutes_ago(10))
    api.reply("stale reply", sent_at=minutes_ago(9))
    for turn in api.turn_items():
        api.dynamodb.update_item(
            TableName="conversation-memory",
            Key={"PK": turn["PK"], "SK": turn["SK"]},
            UpdateExpression="SET expiresAt = :past",
            ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 60)}},
        )
    _, body = api.converse("fresh question")
    assert body["history"] == []


def count_calls(api):
    calls = []
    client = api.handler.SERVICE._store._client
    client.meta.events.register(
        "before-call.dynamodb.*", lambda model, **_: calls.append(model.name)
    )
    return calls


def test_the_usual_converse_is_two_round_trips_and_a_reply_one(api):
    api.converse("warm up", sent_at=minutes_ago(5))
    calls = count_calls(api)
    api.reply("an answer", sent_at=minutes_ago(4))
    assert calls == ["TransactWriteItems"]
    calls.clear()
    api.converse("a question", sent_at=minutes_ago(3))
    assert calls == ["Query", "TransactWriteItems"]


def test_a_repeated_reply_is_answered_from_the_refused_commit_and_the_erase_fence(api):
    api.reply("an answer", sent_at=minutes_ago(4), message_id="r-1")
    calls = count_calls(api)
    api.reply("an answer", sent_at=minutes_ago(4), message_id="r-1")
    # The transaction's refusal carries the first recording: no second read for it. A
    # reply reads nothing before its commit, so the state is read once, for the fence of
    # an erase the first recording may predate (then the id is a new message). The state
    # is read with its memory, as every read of it is: one Query.
    assert calls == ["TransactWriteItems", "Query"]
    assert len(api.turn_items()) == 1


def test_reading_history_stays_one_bounded_query_however_long_the_conversation(api):
    start = minutes_ago(400)
    for n in range(150):
        api.converse(f"q{n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n))
        api.reply(f"a{n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n + 1))
    scanned = []
    client = api.handler.SERVICE._store._client
    client.meta.events.register(
        "after-call.dynamodb.Query",
        lambda parsed, **_: scanned.append(parsed.get("ScannedCount")),
    )
    _, body = api.converse("and now?", tenant="roomy")
    assert len(scanned) == 1
    assert scanned[0] <= 25 + 3  # the state, the memory, the cap and one more turn
    assert body["window"]["kept"] == 24


def test_the_stored_content_is_the_converse_blocks(api):
    api.converse("plain text", sent_at=minutes_ago(1))
    (turn,) = api.turn_items()
    assert json.loads(turn["content"]["S"]) == [{"text": "plain text"}]
    assert turn["role"]["S"] == "user"
