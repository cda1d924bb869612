"""A fold written by the compactor is served with its range, while within historyDays."""

from datetime import UTC, datetime, timedelta

from adapters.conversation_store import format_instant
from adapters.dynamodb_store import STATE_SK, turn_sort_key
from local.proxy_events import LambdaContextStandIn
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


def test_a_state_that_carries_its_memory_is_served_until_its_next_fold_moves_it_out(api):
    """Conversations stored before the memory had an item of its own keep being served
    from the state; their next fold writes the memory item and takes it off the state,
    which every later call then rewrites at its small size."""
    start = minutes_ago(200)
    for n in range(12):
        api.converse(f"question {n} " + "about fees " * 30, sent_at=start + timedelta(minutes=n))
    write_fold(api, start - timedelta(minutes=1), summary="Before: fees of clause 7.")
    _, body = api.converse("and the fees?", sent_at=start + timedelta(minutes=20))
    assert body["memory"]["summary"] == "Before: fees of clause 7."
    assert api.memory_item() == {}

    requests = api.received()
    assert requests, "the unfolded turns ask for a fold"
    compactor = api.compactor()
    folded = compactor.lambda_handler({"Records": requests}, LambdaContextStandIn("compactor"))
    assert folded == {"batchItemFailures": []}

    state = api.state() or {}
    assert not {"foldSummary", "foldCoversFrom", "foldCoversUntil", "turnsFolded"} & set(state)
    memory = api.memory_item()
    assert "Before: fees of clause 7." in memory["foldSummary"]["S"]  # folded on
    _, after = api.converse("so?", sent_at=start + timedelta(minutes=30))
    assert after["memory"]["summary"] == memory["foldSummary"]["S"]
