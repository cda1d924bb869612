"""SPEC 5.8: one compaction request when enough is unfolded and no lease is held."""

from datetime import UTC, datetime, timedelta

from botocore.stub import Stubber

from tests.integration.conftest import minutes_ago


def of_tokens(tokens):
    """A text the estimate counts at exactly `tokens`: letters (13 units) and spaces (1)."""
    letters, spaces = divmod(64 * tokens, 13)
    return "q" * letters + " " * spaces


def talk(api, turns, tokens=100, tenant="roomy"):
    start = minutes_ago(turns + 5)
    for n in range(turns):
        api.converse(of_tokens(tokens), tenant=tenant, sent_at=start + timedelta(minutes=n))


def test_nothing_is_requested_below_both_triggers(api):
    talk(api, 9, tokens=200)  # 1800 unfolded tokens, 9 turns: under both triggers
    assert api.queued() == []


def test_unfolded_tokens_reaching_the_threshold_send_exactly_one_request(api):
    talk(api, 10, tokens=200)  # 200 tokens each: 2000 at the 10th turn, under half the cap
    assert len(api.queued()) == 1


def test_one_request_while_the_lease_is_held(make_api):
    api = make_api(HISTORY_WINDOW_MAX_MESSAGES="25")
    talk(api, 30, tokens=200)  # 200 tokens each: the trigger is reached at the 10th turn
    queued = api.queued()
    assert len(queued) == 1
    assert queued[0]["tenantId"] == "roomy"
    assert queued[0]["contactId"] == "c1"


def test_many_short_turns_trigger_by_count(api):
    talk(api, 12, tokens=2)  # 2 tokens each; 12 turns is half the cap of 25
    assert len(api.queued()) == 1


def test_an_expired_lease_lets_the_next_turn_ask_again(api):
    talk(api, 12, tokens=2)
    assert len(api.queued()) == 1
    service = api.handler.SERVICE
    later = datetime.now(UTC) + timedelta(seconds=901)
    service._clock = later.timestamp
    api.converse("still here", tenant="roomy", sent_at=later)
    assert len(api.queued()) == 2


def test_a_failed_request_gives_the_lease_back_so_a_later_turn_asks_again(api):
    talk(api, 11, tokens=2)
    service = api.handler.SERVICE
    sqs = service._queue._sqs()
    with Stubber(sqs) as stub:
        stub.add_client_error("send_message", "AWS.SimpleQueueService.InternalError")
        status, _ = api.converse("the 12th", tenant="roomy")
    assert status == 200
    assert api.queued() == []
    status, _ = api.converse("the 13th", tenant="roomy")
    assert status == 200
    assert len(api.queued()) == 1


def test_the_counters_show_what_is_unfolded(api):
    talk(api, 3, tokens=10)
    api.reply(of_tokens(10), tenant="roomy")
    status, body = api.request("GET", "/v1/tenants/roomy/contacts/c1/memory")
    assert status == 200
    assert body["memory"] is None
    assert body["counters"] == {
        "turnCount": 3,
        "unfoldedTokens": 40,
        "unfoldedTurns": 4,
        "turnsRecorded": 4,
        "lateTurns": 0,
        "compactionInFlight": False,
    }
