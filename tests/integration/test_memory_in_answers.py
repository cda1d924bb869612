"""A fold written by the compactor is served with its range, while within historyDays."""

from datetime import UTC, datetime, timedelta

from adapters.conversation_store import format_instant
from adapters.dynamodb_store import STATE_SK, turn_sort_key
from memory_core.turns import TurnPosition
from tests.integration.conftest import TABLE, minutes_ago


def write_fold(
    api, covers_until, summary="Counsel asked about clause 7 fees.", contact="c1", tenant="acme"
):
    """A fold as the compactor would have written it, straight into the state item."""
    api.dynamodb.update_item(
        TableName=TABLE,
        Key={"PK": {"S": f"TENANT#{tenant}#CONTACT#{contact}"}, "SK": {"S": STATE_SK}},
        UpdateExpression=(
            "SET foldSummary = :s, foldWatermark = :w, foldVersion = :v, "
            "foldCoversFrom = :f, foldCoversUntil = :u, turnsFolded = :n"
        ),
        ExpressionAttributeValues={
            ":s": {"S": summary},
            ":w": {"S": turn_sort_key(TurnPosition(covers_until, covers_until, "old-turn"))},
            ":v": {"N": "1"},
            ":f": {"S": format_instant(covers_until - timedelta(hours=1))},
            ":u": {"S": format_instant(covers_until)},
            ":n": {"N": "40"},
        },
    )


def test_the_memory_goes_into_the_answer_and_the_system_blocks(api):
    api.converse("hello", sent_at=minutes_ago(30))
    write_fold(api, minutes_ago(40))
    _, body = api.converse("what did we say about fees?")
    assert body["memory"]["summary"] == "Counsel asked about clause 7 fees."
    assert body["memory"]["turnsFolded"] == 40
    system = body["converse"]["system"]
    assert system[0]["text"].endswith("Counsel asked about clause 7 fees.")
    assert system[1] == {"cachePoint": {"type": "default"}}
    status, memory = api.request("GET", "/v1/tenants/acme/contacts/c1/memory")
    assert status == 200
    assert memory["memory"]["coversUntil"] == body["memory"]["coversUntil"]


def test_a_fold_older_than_history_days_is_not_returned(make_api):
    api = make_api(TURN_RETENTION_DAYS="400")
    old = datetime.now(UTC) - timedelta(days=180)
    api.converse("hello, half a year ago", sent_at=old)
    write_fold(api, old)
    _, body = api.converse("I'm back")
    assert body["memory"] is None
    assert body["converse"]["system"] == []
    assert body["history"] == []
    _, memory = api.request("GET", "/v1/tenants/acme/contacts/c1/memory")
    assert memory["memory"] is None
