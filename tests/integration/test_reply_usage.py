"""The model's token usage: recorded with the reply, counted once, logged per tenant.

Through the real handler over the in-process AWS emulation: `POST /turns` with a
`usage`, and the workflow's direct `record` action with Bedrock's reply. The
usage metrics are read where Powertools writes them, as EMF on stdout, and the
per-tenant log line from the handler's log stream. The metrics carry a tenant
only for the tenants `TENANT_USAGE_METRICS` names (each dimension value is a
metric billed on its own); the log line always does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import Api, log_lines
from tests.support.in_memory_store import InMemoryConversationStore

TURNS = "/v1/tenants/acme/contacts/c1/turns"
FULL = {
    "inputTokens": 120,
    "outputTokens": 30,
    "totalTokens": 2_150,
    "cacheReadInputTokens": 1_800,
    "cacheWriteInputTokens": 200,
}
USAGE_METRICS = {"InputTokens", "CacheReadInputTokens", "CacheWriteInputTokens", "OutputTokens"}
LOGGED_COUNTERS = (
    "inputTokens",
    "outputTokens",
    "cacheReadInputTokens",
    "cacheWriteInputTokens",
)


def emf_documents(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"_aws"')]


def usage_documents(stdout: str) -> list[dict[str, Any]]:
    """The EMF documents of the usage metrics, one per reply counted."""
    return [d for d in emf_documents(stdout) if set(d) >= USAGE_METRICS]


def counted(stdout: str) -> list[dict[str, Any]]:
    """Each usage document's figures (Powertools writes each as `[value]`), and the tenant
    it names (None where it names none, as for every tenant by default)."""
    return [
        {"tenant": d.get("tenant"), **{name: one_value(d[name]) for name in USAGE_METRICS}}
        for d in usage_documents(stdout)
    ]


def dimension_sets(document: dict[str, Any]) -> list[list[str]]:
    [metrics] = document["_aws"]["CloudWatchMetrics"]
    return [sorted(names) for names in metrics["Dimensions"]]


def logged(captured: str) -> list[dict[str, Any]]:
    """The `reply_usage` log lines: the tenant, the contact's digest and the counters."""
    return [
        {key: line[key] for key in ("tenant", "contactDigest", *LOGGED_COUNTERS)}
        for line in log_lines(captured)
        if line.get("message") == "reply_usage"
    ]


def digest(tenant: str, contact: str) -> str:
    return hashlib.sha256(f"{tenant}\x00{contact}".encode()).hexdigest()[:16]


def one_value(values: list[float]) -> int:
    [value] = values
    assert value == int(value)
    return int(value)


def stored_usage(api: Api) -> list[dict[str, int] | None]:
    """The `usage` attribute of each reply's turn item, as numbers."""
    found = []
    for item in api.turn_items():
        usage = item.get("usage")
        found.append({k: int(v["N"]) for k, v in usage["M"].items()} if usage else None)
    return found


def reply(api: Api, usage: Any, **fields: Any) -> tuple[int, Any]:
    body = {"role": "assistant", "text": "Clause 9 applies.", "usage": usage, **fields}
    return api.request("POST", TURNS, body)


# -- POST /turns -------------------------------------------------------------------------


def test_a_reply_with_usage_keeps_it_on_its_turn_and_counts_it_for_the_service(api, capsys):
    status, answer = reply(api, FULL)
    assert status == 201, answer
    assert answer["turn"]["content"] == [{"text": "Clause 9 applies."}]
    assert "usage" not in answer["turn"]
    assert stored_usage(api) == [FULL]
    [document] = usage_documents(capsys.readouterr().out)
    [metrics] = document["_aws"]["CloudWatchMetrics"]
    assert metrics["Namespace"] == "ConversationMemoryTests"
    # No tenant dimension: one series per metric, however many tenants there are.
    assert dimension_sets(document) == [["service"]]
    assert "tenant" not in document
    assert {m["Name"]: m["Unit"] for m in metrics["Metrics"]} == dict.fromkeys(
        USAGE_METRICS, "Count"
    )
    assert document["service"] == "conversation-memory-tests"
    assert counted(json.dumps(document)) == [
        {
            "tenant": None,
            "InputTokens": 120,
            "CacheReadInputTokens": 1_800,
            "CacheWriteInputTokens": 200,
            "OutputTokens": 30,
        }
    ]


def test_the_reply_is_logged_with_its_tenant_and_counters_and_no_contact_id(api, logs, capsys):
    status, _ = reply(api, FULL)
    assert status == 201
    output = logs.getvalue() + capsys.readouterr().out
    [line] = [line for line in log_lines(output) if line.get("message") == "reply_usage"]
    assert line["level"] == "INFO"
    assert logged(output) == [
        {
            "tenant": "acme",
            "contactDigest": digest("acme", "c1"),
            "inputTokens": 120,
            "outputTokens": 30,
            "cacheReadInputTokens": 1_800,
            "cacheWriteInputTokens": 200,
        }
    ]
    assert "contact" not in line
    assert '"c1"' not in json.dumps(line)


def test_a_tenant_named_in_the_setting_is_counted_under_its_name_as_well(make_api, capsys):
    api = make_api(TENANT_USAGE_METRICS="roomy, limited")
    for tenant in ("acme", "roomy"):
        status, _ = api.request(
            "POST",
            f"/v1/tenants/{tenant}/contacts/c1/turns",
            {"role": "assistant", "text": "ok", "usage": {"inputTokens": 7, "outputTokens": 1}},
        )
        assert status == 201
    acme, roomy = usage_documents(capsys.readouterr().out)
    assert dimension_sets(acme) == [["service"]]
    # One document, one value, counted both service-wide and under the tenant.
    assert dimension_sets(roomy) == [["service"], ["service", "tenant"]]
    assert (roomy["tenant"], roomy["service"]) == ("roomy", "conversation-memory-tests")
    assert counted(json.dumps(roomy)) == [
        {
            "tenant": "roomy",
            "InputTokens": 7,
            "CacheReadInputTokens": 0,
            "CacheWriteInputTokens": 0,
            "OutputTokens": 1,
        }
    ]


def test_cache_figures_left_out_are_not_stored_and_count_zero(api, capsys):
    status, _ = reply(api, {"inputTokens": 10, "outputTokens": 5})
    assert status == 201
    assert stored_usage(api) == [{"inputTokens": 10, "outputTokens": 5}]
    assert counted(capsys.readouterr().out) == [
        {
            "tenant": None,
            "InputTokens": 10,
            "CacheReadInputTokens": 0,
            "CacheWriteInputTokens": 0,
            "OutputTokens": 5,
        }
    ]


def test_bedrocks_usage_object_is_taken_as_it_comes_its_cache_details_not_kept(api, capsys):
    bedrocks = {**FULL, "cacheDetails": [{"ttl": "5m", "inputTokens": 200}]}
    status, answer = reply(api, bedrocks)
    assert status == 201, answer
    assert stored_usage(api) == [FULL]
    assert len(usage_documents(capsys.readouterr().out)) == 1


def test_each_tenant_is_logged_under_its_own_name(api, logs, capsys):
    for tenant in ("acme", "roomy"):
        status, _ = api.request(
            "POST",
            f"/v1/tenants/{tenant}/contacts/c1/turns",
            {"role": "assistant", "text": "ok", "usage": {"inputTokens": 7, "outputTokens": 1}},
        )
        assert status == 201
    output = logs.getvalue() + capsys.readouterr().out
    assert [line["tenant"] for line in logged(output)] == ["acme", "roomy"]
    assert [c["tenant"] for c in counted(output)] == [None, None]


def test_a_reply_without_usage_counts_nothing(api, logs, capsys):
    status, _ = api.reply("Yes.")
    assert status == 201
    assert stored_usage(api) == [None]
    output = logs.getvalue() + capsys.readouterr().out
    assert usage_documents(output) == []
    assert logged(output) == []


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"inputTokens": -1, "outputTokens": 5}, "usage.inputTokens"),
        ({"inputTokens": "10", "outputTokens": 5}, "usage.inputTokens"),
        ({"inputTokens": 1.5, "outputTokens": 5}, "usage.inputTokens"),
        ({"inputTokens": True, "outputTokens": 5}, "usage.inputTokens"),
        ({"inputTokens": 2**31, "outputTokens": 5}, "usage.inputTokens"),
        ({"outputTokens": 5}, "usage.inputTokens"),
        ({"inputTokens": 5}, "usage.outputTokens"),
        (
            {"inputTokens": 1, "outputTokens": 1, "cacheReadInputTokens": -3},
            "usage.cacheReadInputTokens",
        ),
        ({"inputTokens": 1, "outputTokens": 1, "cacheWriteInputTokens": None}, None),
        ({"inputTokens": 1, "outputTokens": 1, "totalTokens": "2"}, "usage.totalTokens"),
        ({"inputTokens": 1, "outputTokens": 1, "cachedTokens": 1}, "usage.cachedTokens"),
        (5, "usage"),
        ([{"inputTokens": 1, "outputTokens": 1}], "usage"),
    ],
)
def test_a_bad_usage_is_refused_naming_the_field_and_nothing_is_written(api, capsys, usage, field):
    status, answer = reply(api, usage)
    if field is None:  # null stands for absent, as everywhere in the API
        assert status == 201, answer
        return
    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith(f"{field}: "), answer
    assert api.items() == []
    assert usage_documents(capsys.readouterr().out) == []


def test_a_user_turn_returning_tool_results_carries_no_usage(api, capsys):
    result = {"toolResult": {"toolUseId": "w1", "content": [{"text": "21 C"}]}}
    status, answer = api.request(
        "POST",
        TURNS,
        {"role": "user", "content": [result], "usage": {"inputTokens": 1, "outputTokens": 1}},
    )
    assert status == 400, answer
    assert answer["error"]["message"].startswith("usage: only an assistant turn carries")
    assert api.items() == []
    assert usage_documents(capsys.readouterr().out) == []


def test_a_replayed_reply_is_counted_once_and_keeps_its_first_usage(api, logs, capsys):
    first = reply(api, FULL, id="r-1")
    again = reply(api, FULL, id="r-1")
    # A retry may leave the usage out: nothing it reported is lost.
    bare = api.request(
        "POST",
        "/v1/tenants/acme/contacts/c1/turns",
        {"role": "assistant", "text": "Clause 9 applies.", "id": "r-1"},
    )
    assert [first[0], again[0], bare[0]] == [201, 201, 201]
    assert first[1] == again[1] == bare[1]
    assert stored_usage(api) == [FULL]
    output = logs.getvalue() + capsys.readouterr().out
    assert [c["InputTokens"] for c in counted(output)] == [120]
    assert [line["inputTokens"] for line in logged(output)] == [120]
    status, memory = api.request("GET", "/v1/tenants/acme/contacts/c1/memory")
    assert (status, memory["counters"]["turnsRecorded"]) == (200, 1)


@pytest.mark.parametrize(
    ("first_usage", "kept"),
    [(None, "no usage"), (FULL, "other usage")],
    ids=["adds-usage", "other-figures"],
)
def test_a_replay_that_would_change_the_usage_is_refused_naming_it(api, capsys, first_usage, kept):
    """Answered 201, its figures would be dropped unseen: a second model call's tokens,
    or the usage of a reply first recorded before the model reported it."""
    body = {"role": "assistant", "text": "Clause 9 applies.", "id": "r-1"}
    if first_usage is not None:
        body["usage"] = first_usage
    assert api.request("POST", "/v1/tenants/acme/contacts/c1/turns", body)[0] == 201
    items = api.items()
    capsys.readouterr()
    status, answer = reply(api, {"inputTokens": 999, "outputTokens": 9}, id="r-1")
    assert status == 409, answer
    assert answer["error"]["code"] == "id_reused"
    assert answer["error"]["message"] == (
        f"usage: message id 'r-1' was recorded with {kept}; "
        "a retry sends the usage its first call sent, or none"
    )
    assert api.items() == items
    assert usage_documents(capsys.readouterr().out) == []


def test_the_openapi_document_offers_usage_on_replies_only(api):
    status, document = api.request("GET", "/openapi.json")
    assert status == 200
    schemas = document["components"]["schemas"]
    request = schemas["RecordTurnRequest"]
    assert "usage" in request["properties"]
    (user_rule,) = [r for r in request["allOf"] if r["if"]["properties"]["role"]["const"] == "user"]
    assert user_rule["then"]["not"] == {"required": ["usage"]}
    usage = schemas["Usage"]
    assert set(usage["required"]) == {"inputTokens", "outputTokens"}
    assert usage["properties"]["inputTokens"]["minimum"] == 0


# -- the workflow's direct `record` action ----------------------------------------------


def record(api: Api, model_reply: dict[str, Any], **fields: Any) -> Any:
    event = {
        "action": "record",
        "tenantId": "acme",
        "contactId": "c1",
        "role": "assistant",
        "modelReply": model_reply,
        **fields,
    }
    return api.handler.lambda_handler(event, LambdaContextStandIn())


def sdk_reply(usage: Any) -> dict[str, Any]:
    """Bedrock's reply as the workflow's ResultSelector passes it (the SDK's names)."""
    return {"content": [{"Text": "Clause 9 applies."}], "stopReason": "end_turn", "usage": usage}


def test_the_workflows_reply_is_recorded_with_the_usage_bedrock_reported(api, capsys):
    usage = {
        "InputTokens": 120,
        "OutputTokens": 30,
        "TotalTokens": 2_150,
        "CacheReadInputTokens": 1_800,
        "CacheWriteInputTokens": 200,
        # Counted by nobody here: Bedrock's breakdown, and whatever it adds later.
        "CacheDetails": [{"Ttl": "5m", "InputTokens": 200}],
        "SomethingNew": 3,
    }
    answer = record(api, sdk_reply(usage), id="r-1")
    assert answer["turn"]["content"] == [{"text": "Clause 9 applies."}]
    assert stored_usage(api) == [FULL]
    assert len(counted(capsys.readouterr().out)) == 1
    assert record(api, sdk_reply(usage), id="r-1") == answer  # a retried task
    assert counted(capsys.readouterr().out) == []


def test_a_reply_from_an_execution_without_usage_is_recorded_as_before(api, capsys):
    model_reply = {"content": [{"Text": "Clause 9 applies."}], "stopReason": "end_turn"}
    assert record(api, model_reply)["turn"]["role"] == "assistant"
    assert stored_usage(api) == [None]
    assert counted(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("usage", "reason"),
    [
        ({"InputTokens": -1, "OutputTokens": 5}, "modelReply.usage.inputTokens: "),
        ({"OutputTokens": 5}, "modelReply.usage.inputTokens: "),
        ("10 tokens", "modelReply.usage: a str, not an object"),
    ],
)
def test_a_usage_not_in_bedrocks_shape_is_logged_and_the_reply_still_recorded(
    api, logs, capsys, usage, reason
):
    answer = record(api, sdk_reply(usage))
    assert answer["turn"]["content"] == [{"text": "Clause 9 applies."}]
    assert stored_usage(api) == [None]
    assert counted(capsys.readouterr().out) == []
    [warning] = [line for line in log_lines(logs.getvalue()) if line["level"] == "WARNING"]
    assert warning["message"] == "model_usage_unreadable"
    assert warning["reason"].startswith(reason)
    assert (warning["tenant"], warning["contact"]) == ("acme", "c1")


def test_a_direct_record_may_carry_the_apis_usage_as_well(api, capsys):
    event = {
        "action": "record",
        "tenantId": "acme",
        "contactId": "c1",
        "role": "assistant",
        "text": "hello",
        "usage": {"inputTokens": 3, "outputTokens": 2},
    }
    assert api.handler.lambda_handler(event, LambdaContextStandIn())["turn"]["role"] == "assistant"
    assert stored_usage(api) == [{"inputTokens": 3, "outputTokens": 2}]
    assert [c["InputTokens"] for c in counted(capsys.readouterr().out)] == [3]
    bad = {**event, "id": "r-2", "usage": {"inputTokens": -3, "outputTokens": 2}}
    refused = api.handler.lambda_handler(bad, LambdaContextStandIn())
    assert refused["statusCode"] == 400
    assert refused["error"]["message"].startswith("usage.inputTokens: ")


# -- what the metrics cost --------------------------------------------------------------

TENANTS = [f"tenant-{n:04}" for n in range(1_000)]
METRIC_MONTH_USD = 0.30
"""CloudWatch's price of a custom metric a month (the first 10,000, us-east-1): every
name, namespace and set of dimension values is one, however often it is written."""
BUDGET_USD = 50


def metric_series(stdout: str) -> set[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """Each metric an EMF document defines: namespace, name, and each dimension set's values."""
    found = set()
    for document in emf_documents(stdout):
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for names in directive["Dimensions"]:
                dimensions = tuple(sorted((name, document[name]) for name in names))
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], dimensions))
    return found


@pytest.fixture
def thousand_tenants(make_api: Callable[..., Api], tmp_path: Path) -> Callable[..., Api]:
    """The handler, with rules listing 1,000 tenants (each with the default rules).

    Its routes, telemetry and metrics as deployed, over the in-memory store: the
    emulator copies its whole table on every transaction, and 1,000 conversations
    would take minutes. What is emitted does not depend on the store.
    """
    rules = tmp_path / "thousand.json"
    rules.write_text(json.dumps({"tenants": {tenant: {} for tenant in TENANTS}}))

    def build(**env: str) -> Api:
        api = make_api(RULES_FILE=str(rules), **env)
        handler = api.handler
        service = handler.ConverseService(
            store=InMemoryConversationStore(handler.SETTINGS.turn_retention_days),
            queue=handler.QUEUE,
            rules=handler.RULES,
            settings=handler.SETTINGS,
            telemetry=handler.TELEMETRY,
        )
        app = handler.build_resolver(
            service, handler.DATA, identity_required=False, logger=handler.logger
        )
        api.monkeypatch.setattr(handler, "APP", app)
        return api

    return build


def exchange(api: Api, tenant: str) -> None:
    """A converse and its reply, with the model's usage: what every tenant does."""
    turns = f"/v1/tenants/{tenant}/contacts/c1"
    status, answer = api.request("POST", f"{turns}/converse", {"message": {"text": "Hello"}})
    assert status == 200, answer
    body = {"role": "assistant", "text": "Hi.", "usage": FULL}
    status, answer = api.request("POST", f"{turns}/turns", body)
    assert status == 201, answer


def test_the_metrics_do_not_grow_with_the_tenants(thousand_tenants, capsys):
    """$0.30 a metric a month: a tenant dimension on the four usage metrics cost $1.20 a
    tenant, $1,200 a month at 1,000 tenants. By default the count is the same for one
    tenant as for a thousand, and within $50 a month."""
    api = thousand_tenants()
    exchange(api, TENANTS[0])
    after_one = metric_series(capsys.readouterr().out)
    emitted = set(after_one)
    for tenant in TENANTS[1:]:
        exchange(api, tenant)
        emitted |= metric_series(capsys.readouterr().out)
    assert {name for _, name, _ in after_one} >= USAGE_METRICS
    assert emitted == after_one
    assert all(name != "tenant" for *_, dimensions in emitted for name, _ in dimensions)
    assert len(emitted) * METRIC_MONTH_USD <= BUDGET_USD
    assert len(emitted) <= BUDGET_USD / METRIC_MONTH_USD  # 166


def test_each_tenant_named_in_the_setting_adds_its_four_metrics_only(thousand_tenants, capsys):
    named = TENANTS[:3]
    api = thousand_tenants(TENANT_USAGE_METRICS=",".join(named))
    emitted: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
    for tenant in TENANTS[:10]:
        exchange(api, tenant)
        emitted |= metric_series(capsys.readouterr().out)
    by_tenant = {
        dict(dimensions)["tenant"]: name
        for _, name, dimensions in emitted
        if "tenant" in dict(dimensions)
    }
    assert set(by_tenant) == set(named)
    per_tenant = [series for series in emitted if "tenant" in dict(series[2])]
    assert len(per_tenant) == 4 * len(named)
    assert {name for _, name, _ in per_tenant} == USAGE_METRICS
