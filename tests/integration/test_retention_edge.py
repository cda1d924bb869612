"""Turns outlive every message that can still see them: late and backdated messages included."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.conftest import minutes_ago

DAY = timedelta(days=1)


def history_texts(body):
    return [m["content"][0]["text"] for m in body["history"]]


def test_a_turn_at_the_edge_of_history_days_is_there_for_a_message_a_minute_old(api):
    current_sent_at = minutes_ago(1)
    api.converse("at the edge", sent_at=current_sent_at - 30 * DAY + timedelta(seconds=1))
    status, body = api.converse("a minute on the wire", sent_at=current_sent_at)
    assert status == 200
    assert history_texts(body) == ["at the edge"]


def test_a_replay_backdated_by_days_sees_its_whole_history_range(api):
    replayed_at = datetime.now(UTC) - 10 * DAY
    api.converse("thirty-nine days ago", sent_at=replayed_at - 29 * DAY)
    api.converse("forty-one days ago", sent_at=replayed_at - 31 * DAY)
    status, body = api.converse("replayed from a transcript", sent_at=replayed_at)
    assert status == 200
    assert history_texts(body) == ["thirty-nine days ago"]  # the other is out of range


@pytest.mark.parametrize(
    ("retention", "tenant", "lifetime_days"),
    [("30", "acme", 60), ("30", "short", 30), ("400", "acme", 400), ("40", "acme", 60)],
)
def test_turns_markers_and_the_state_carry_the_lifetime(
    make_api, rules_file, retention, tenant, lifetime_days
):
    rules = json.loads(rules_file.read_text())
    rules["tenants"]["short"] = {"historyDays": 15}
    rules_file.write_text(json.dumps(rules))
    api = make_api(TURN_RETENTION_DAYS=retention)
    sent_at = minutes_ago(2)
    api.converse("hello", tenant=tenant, sent_at=sent_at)
    api.reply("hi", tenant=tenant, sent_at=sent_at + timedelta(seconds=1))
    items = api.items()
    assert len(items) == 5  # two turns, two markers, the state
    for item in items:
        ttl = int(item["expiresAt"]["N"])
        if item["SK"]["S"] == "TURN#~STATE":
            now = datetime.now(UTC).timestamp()
            assert abs(ttl - (now + lifetime_days * 86400)) <= 5
        else:
            sort_key = item.get("turnSk", item["SK"])["S"]  # a marker names its turn
            sent = datetime.fromisoformat(sort_key.split("#")[1])
            assert ttl == int((sent + lifetime_days * DAY).timestamp())
