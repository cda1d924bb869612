"""Seed 002's verification table, through the handler."""

from datetime import UTC, datetime, timedelta

from tests.integration.conftest import minutes_ago


def test_25_messages_then_a_25_hour_gap_let_the_next_reach_the_model_with_count_1(api):
    start = datetime.now(UTC) - timedelta(hours=30)
    for n in range(25):
        status, body = api.converse(f"question {n}", sent_at=start + timedelta(minutes=n))
        assert (status, body["decision"], body["turnCount"]) == (200, "model", n + 1)
    status, body = api.converse("back again", sent_at=start + timedelta(minutes=24, hours=25))
    assert (status, body["decision"], body["turnCount"]) == (200, "model", 1)


def test_the_26th_message_without_a_gap_escalates_and_so_does_the_27th(api):
    start = minutes_ago(120)
    for n in range(25):
        api.converse(f"question {n}", sent_at=start + timedelta(minutes=n))
    for count in (26, 27):
        status, body = api.converse("one more", sent_at=start + timedelta(minutes=count))
        assert status == 200
        assert (body["decision"], body["reason"], body["turnCount"]) == (
            "escalate",
            "turn_cap",
            count,
        )
        assert body["current"] == {"role": "user", "content": [{"text": "one more"}]}
        assert "history" not in body or body["history"] is None


def test_a_tenant_without_the_fields_gets_25_turns_and_a_24_hour_reset(api):
    start = datetime.now(UTC) - timedelta(hours=50)
    for n in range(26):
        _, body = api.converse(f"q{n}", tenant="defaults", sent_at=start + timedelta(minutes=n))
    assert body["decision"] == "escalate"
    _status, body = api.converse(
        "after a day", tenant="defaults", sent_at=start + timedelta(minutes=25, hours=24)
    )
    assert (body["decision"], body["turnCount"]) == ("model", 1)


def test_a_turn_31_days_old_is_not_passed_and_one_29_days_old_is(make_api):
    api = make_api(TURN_RETENTION_DAYS="60")
    now = datetime.now(UTC)
    api.converse("from 31 days ago", sent_at=now - timedelta(days=31))
    api.converse("from 29 days ago", sent_at=now - timedelta(days=29))
    status, body = api.converse("today", sent_at=now)
    assert status == 200
    texts = [m["content"][0]["text"] for m in body["history"]]
    assert texts == ["from 29 days ago"]


def test_no_more_than_ten_turns_are_passed_with_a_cap_of_ten(make_api):
    api = make_api(
        HISTORY_WINDOW_MAX_MESSAGES="10",
        HISTORY_WINDOW_FLOOR_MESSAGES="10",
        HISTORY_WINDOW_MAX_TOKENS="4000",
        MEMORY_FOLD_MIN_TOKENS="2000",
    )
    start = minutes_ago(60)
    for n in range(15):
        api.converse(f"question {n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n))
        api.reply(f"answer {n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n + 1))
    status, body = api.converse("and now?", tenant="roomy")
    assert status == 200
    assert len(body["history"]) == 10
    assert body["history"][0]["role"] == "user"
    assert body["history"][-1]["content"] == [{"text": "answer 14"}]
