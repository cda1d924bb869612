"""`GET .../window` through the handler on moto: the next call's window, previewed, and each
retained turn's standing; nothing recorded, counted or queued."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import AGENT_ROLE, Api, minutes_ago

CONTEXT = LambdaContextStandIn(function_name="compactor-local")


def preview(api: Api, tenant: str = "roomy", contact: str = "c1", **kw: Any) -> tuple[int, Any]:
    return api.request("GET", f"/v1/tenants/{tenant}/contacts/{contact}/window", **kw)


def talk(api: Api, pairs: int, *, tenant: str = "roomy", chars: int = 400) -> None:
    start = minutes_ago(2 * pairs + 30)
    for n in range(pairs):
        at = start + timedelta(minutes=2 * n)
        api.converse(f"question {n}: " + "q" * chars, tenant=tenant, sent_at=at, message_id=f"q{n}")
        api.reply(
            f"answer {n}: " + "a" * chars,
            tenant=tenant,
            sent_at=at + timedelta(minutes=1),
            message_id=f"a{n}",
        )


def fold(api: Api) -> None:
    compactor = api.compactor()
    requests = api.received()
    assert requests, "no compaction was requested"
    answer = compactor.lambda_handler({"Records": requests}, CONTEXT)
    assert answer == {"batchItemFailures": []}


def standing(body: dict[str, Any], turn_id: str) -> str:
    return str(body["standings"][turn_id]["standing"])


def test_the_preview_answers_the_window_the_next_call_would_serve(api):
    talk(api, 3)

    status, body = preview(api)
    _, answer = api.converse("and now?", tenant="roomy")

    assert status == 200, body
    assert body["history"] == answer["history"]
    assert body["window"] == answer["window"]
    assert body["memory"] is None
    assert body["converse"]["messages"] == answer["converse"]["messages"][: len(body["history"])]
    assert body["counts"] == {
        "window": 6,
        "trimmed": 0,
        "folded": 0,
        "out_of_range": 0,
        "held_by_neither": 0,
    }
    assert body["historyRange"]["historyDays"] == 30


def test_the_preview_records_nothing_and_queues_no_compaction(api):
    talk(api, 20)
    api.received(visibility_timeout=0)
    before = sorted(json.dumps(item, sort_keys=True) for item in api.items())
    while api.received():  # a compaction request from the talk, drained
        pass

    status, _ = preview(api)

    assert status == 200
    assert sorted(json.dumps(item, sort_keys=True) for item in api.items()) == before
    assert api.received() == []


def test_the_preview_does_not_count_towards_the_rate_limit(api):
    for n in range(2):
        assert api.converse(f"message {n}", tenant="limited")[0] == 200
    for _ in range(5):
        assert preview(api, tenant="limited")[0] == 200
    assert api.converse("the third of three a minute", tenant="limited")[0] == 200
    assert api.converse("a fourth", tenant="limited")[0] == 429


def test_the_preview_does_not_count_towards_the_turn_cap(api):
    assert api.converse("first", tenant="capped")[0] == 200
    for _ in range(3):
        assert preview(api, tenant="capped")[0] == 200
    _, second = api.converse("second", tenant="capped")
    assert second["decision"] == "model"


def test_a_long_turn_is_trimmed_with_the_tokens_it_lost(api):
    api.converse("short question", tenant="roomy", message_id="q0", sent_at=minutes_ago(10))
    api.reply("word " * 3000, tenant="roomy", message_id="a0", sent_at=minutes_ago(9))

    _, body = preview(api)

    assert body["standings"]["a0"]["standing"] == "trimmed"
    omitted = body["standings"]["a0"]["omittedTokens"]
    assert omitted > 0
    assert f"… {omitted} tokens omitted …" in json.dumps(body["history"], ensure_ascii=False)
    assert body["standings"]["q0"] == {"standing": "window"}


def test_folded_turns_and_turns_out_of_range_stand_as_such(api):
    old = datetime.now(UTC) - timedelta(days=40)  # "acme" keeps 30 days of history
    api.converse("an old question", tenant="acme", message_id="old-q", sent_at=old)
    api.reply("an old answer", tenant="acme", message_id="old-a", sent_at=old + timedelta(hours=1))
    talk(api, 20, tenant="acme")
    fold(api)

    _, body = preview(api, tenant="acme")

    assert body["memory"]["version"] == 1
    assert body["memory"]["turnsFolded"] == 42  # the fold took every turn
    # Older than the range, but the memory served holds its gist.
    assert standing(body, "old-q") == "folded"
    assert standing(body, "q0") == "folded"
    assert standing(body, "a19") == "window"  # in the memory too: the window wins
    counts = body["counts"]
    assert counts["window"] == body["window"]["kept"]
    assert counts["folded"] == 42 - counts["window"]
    assert len(body["standings"]) == 42


def test_old_turns_no_memory_holds_are_out_of_range(api):
    old = datetime.now(UTC) - timedelta(days=40)
    api.converse("an old question", tenant="acme", message_id="old-q", sent_at=old)
    api.converse("a recent one", tenant="acme", message_id="new-q", sent_at=minutes_ago(1))

    _, body = preview(api, tenant="acme")

    assert body["standings"] == {
        "old-q": {"standing": "out_of_range"},
        "new-q": {"standing": "window"},
    }


def test_turns_the_window_left_and_no_memory_holds_are_held_by_neither(api):
    talk(api, 20)  # no fold: the window cannot hold 40 turns of 100 tokens

    _, body = preview(api)

    assert body["counts"]["held_by_neither"] > 0
    assert standing(body, "q0") == "held_by_neither"
    assert body["counts"]["window"] == body["window"]["kept"]


def test_nothing_stored_is_404_and_an_unknown_tenant_404(api):
    status, body = preview(api, contact="nobody")
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body = preview(api, tenant="no-such-tenant")
    assert (status, body["error"]["code"]) == (404, "unknown_tenant")


def test_a_caller_of_another_tenant_gets_403_and_sees_nothing(make_api):
    api = make_api(CALLER_IDENTITY="required")
    api.converse("private", tenant="guarded", caller=AGENT_ROLE)

    status, body = preview(
        api, tenant="guarded", caller="arn:aws:iam::123456789012:role/other-agent"
    )

    assert status == 403
    assert "standings" not in body


def test_the_route_is_in_the_openapi_document(api):
    _, document = api.request("GET", "/openapi.json")
    operation = document["paths"]["/v1/tenants/{tenant_id}/contacts/{contact_id}/window"]["get"]
    assert set(operation["responses"]) == {"200", "400", "403", "404"}


def test_direct_invocation_previews_as_the_route_does(api):
    talk(api, 2)
    _, over_http = preview(api)

    direct = api.handler.lambda_handler(
        {"action": "window", "tenantId": "roomy", "contactId": "c1"}, LambdaContextStandIn()
    )

    assert direct["standings"] == over_http["standings"]
    assert direct["history"] == over_http["history"]
