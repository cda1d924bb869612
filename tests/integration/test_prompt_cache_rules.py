"""A tenant's `promptCache` and `promptCacheTtl` rules, through the handler (SPEC 5, caching).

The same conversation, memory included, is held with tenants whose rules
differ only in caching: the answers differ only in their cache points, which
appear in `converse` alone (never in `history`, never in the figures).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import Api, minutes_ago
from tests.integration.test_memory_in_answers import write_fold as fold_into_state
from tests.support.converse_validator import assert_valid_for_converse

RULES = {
    "tenants": {
        "plain": {},
        "uncached": {"promptCache": "off", "promptCacheTtl": "1h"},
        "hourly": {"promptCacheTtl": "1h"},
        "steady": {"promptCache": "stable"},
    }
}
FIVE_MINUTES = {"cachePoint": {"type": "default"}}
ONE_HOUR = {"cachePoint": {"type": "default", "ttl": "1h"}}
START = minutes_ago(90)


@pytest.fixture
def api(make_api: Callable[..., Api], rules_file: Path) -> Api:
    rules_file.write_text(json.dumps(RULES))
    return make_api()


def write_fold(api: Api, tenant: str, summary: str = "Counsel asked about clause 7 fees.") -> None:
    fold_into_state(api, START - timedelta(minutes=10), summary=summary, tenant=tenant)


def conversation(api: Api, tenant: str, *, memory: bool = True) -> dict[str, Any]:
    """Two exchanges, a fold, then the question under test; its answer."""
    api.converse("Is clause 8 binding?", tenant=tenant, sent_at=START)
    api.reply("Yes, from signature.", tenant=tenant, sent_at=START + timedelta(minutes=1))
    api.converse("And clause 9?", tenant=tenant, sent_at=START + timedelta(minutes=2))
    api.reply("Void since March.", tenant=tenant, sent_at=START + timedelta(minutes=3))
    if memory:
        write_fold(api, tenant)
    status, body = api.converse(
        "What about the fees?",
        tenant=tenant,
        sent_at=START + timedelta(minutes=4),
        message_id="m-fees",
    )
    assert status == 200
    assert_valid_for_converse(body["converse"])
    return dict(body)


def cache_points(converse: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = [*converse["system"], *(b for m in converse["messages"] for b in m["content"])]
    return [block for block in blocks if "cachePoint" in block]


def without_cache_points(converse: dict[str, Any]) -> dict[str, Any]:
    return {
        "system": [b for b in converse["system"] if "cachePoint" not in b],
        "messages": [
            {**m, "content": [b for b in m["content"] if "cachePoint" not in b]}
            for m in converse["messages"]
        ],
    }


def test_the_default_tenant_gets_a_point_after_the_memory_and_one_after_the_history(api):
    body = conversation(api, "plain")
    assert body["memory"]["summary"] == "Counsel asked about clause 7 fees."
    assert body["converse"]["system"][1] == FIVE_MINUTES
    messages = body["converse"]["messages"]
    assert messages[-2]["content"] == [{"text": "Void since March."}, FIVE_MINUTES]
    assert messages[-1] == body["current"]
    assert cache_points(body["converse"]) == [FIVE_MINUTES, FIVE_MINUTES]


def test_a_tenant_with_prompt_cache_off_gets_no_cache_point_even_with_memory(api):
    body = conversation(api, "uncached")
    assert body["memory"]["summary"] == "Counsel asked about clause 7 fees."
    assert body["converse"]["system"][0]["text"].endswith("Counsel asked about clause 7 fees.")
    assert "cachePoint" not in json.dumps(body)
    assert body["converse"]["messages"] == [*body["history"], body["current"]]
    # Only the cache points differ from a cached tenant's answer to the same conversation.
    cached = conversation(api, "plain")
    assert body["converse"] == without_cache_points(cached["converse"])
    for part in ("history", "current", "memory", "window", "turnCount", "decision"):
        assert body[part] == cached[part], part


def test_a_tenant_with_the_hour_ttl_gets_it_on_both_points(api):
    body = conversation(api, "hourly")
    assert cache_points(body["converse"]) == [ONE_HOUR, ONE_HOUR]
    assert body["converse"]["system"][1] == ONE_HOUR
    assert body["converse"]["messages"][-2]["content"][-1] == ONE_HOUR
    assert "cachePoint" not in json.dumps(body["history"])
    assert body["window"] == conversation(api, "plain")["window"]


def test_without_memory_there_is_only_the_point_after_the_history(api):
    body = conversation(api, "hourly", memory=False)
    assert body["converse"]["system"] == []
    assert cache_points(body["converse"]) == [ONE_HOUR]
    status, first = api.converse("hello", tenant="hourly", contact="new")
    assert status == 200
    assert cache_points(first["converse"]) == []  # no memory, no history: no point at all


def test_a_short_stable_conversation_keeps_its_whole_history_with_a_point_after_the_last_call(
    api,
):
    steady = conversation(api, "steady")
    plain = conversation(api, "plain")
    # Nothing to leave out yet: the same history as the sliding window.
    for part in ("history", "current", "window"):
        assert steady[part] == plain[part], part
    # The fold came after the edge was set, with no memory: it waits for the edge's move
    # (everything it holds is still in the history).
    assert plain["memory"] is not None
    assert steady["memory"] is None
    assert steady["converse"]["system"] == []
    messages = steady["converse"]["messages"]
    # One more point: where the previous call's history ended (before "And clause 9?").
    assert messages[1]["content"] == [{"text": "Yes, from signature."}, FIVE_MINUTES]
    assert cache_points(steady["converse"]) == [FIVE_MINUTES] * 2
    assert (
        without_cache_points(steady["converse"])["messages"]
        == (without_cache_points(plain["converse"])["messages"])
    )


def test_a_retry_is_answered_with_the_same_cache_points(api):
    first = conversation(api, "hourly")
    status, again = api.converse(
        "What about the fees?",
        tenant="hourly",
        sent_at=START + timedelta(minutes=4),
        message_id="m-fees",
    )
    assert status == 200
    assert again == first


def for_the_workflow(api: Api, tenant: str, text: str) -> dict[str, Any]:
    event = {
        "action": "converse",
        "for": "workflow",
        "tenantId": tenant,
        "contactId": "c1",
        "message": {"text": text},
    }
    return dict(api.handler.lambda_handler(event, LambdaContextStandIn()))


@pytest.mark.parametrize(
    ("tenant", "expected"),
    [
        ("plain", {"CachePoint": {"Type": "default"}}),
        ("hourly", {"CachePoint": {"Type": "default", "Ttl": "1h"}}),
        ("uncached", None),
    ],
)
def test_the_workflows_model_input_carries_the_tenants_points_under_the_sdk_names(
    api, tenant, expected
):
    conversation(api, tenant)
    state = for_the_workflow(api, tenant, "And the deadline?")
    model_input = state["model"]["input"]
    if expected is None:
        assert "CachePoint" not in json.dumps(model_input)
        return
    assert model_input["System"][1] == expected
    # The history now ends on the question about the fees, merged with this one.
    last = model_input["Messages"][-1]["Content"]
    assert last == [{"Text": "What about the fees?"}, expected, {"Text": "And the deadline?"}]


def test_the_openapi_document_says_where_cache_points_appear_and_that_off_has_none(api):
    status, document = api.request("GET", "/openapi.json")
    assert status == 200
    converse = document["components"]["schemas"]["ConverseResponse"]["properties"]["converse"]
    description = converse["description"]
    assert "one after the memory in `system`, one after the" in description
    assert "With `off` there is no cache point at all" in description
    assert '"ttl": "1h"' in description
