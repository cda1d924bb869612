"""The model's usage, from Bedrock's answer to the dashboard: the workflow selects it whole,
a widget graphs the share of prompt tokens read from the cache over every tenant, and
a Logs Insights widget sums the usage per tenant from the history Lambda's log.

No metric carries a tenant unless `TENANT_USAGE_METRICS` names it (each dimension
value is a custom metric billed on its own): the dashboard graphs the service-wide
series, and searches the per-tenant ones only when tenants are named.
"""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Logger, Metrics

from adapters.conversation_store import ConversationKey
from converse_history.telemetry import (
    REPLY_USAGE,
    TENANT_DIMENSION,
    USAGE_METRICS,
    PowertoolsTelemetry,
)
from infra.monitoring import TENANT_USAGE_QUERY
from infra.service_function import HISTORY_SERVICE, METRICS_NAMESPACE
from memory_core.usage import TokenUsage
from tests.infra.conftest import of_type, synthesise
from tests.support.local_state_machine import definition_from_template

README = Path(__file__).resolve().parents[2] / "README.md"
SEARCH = (
    'SEARCH(\'{{ConversationMemory,service,tenant}} MetricName="{name}" '
    "service=\"converse-history\"', 'Sum', 300)"
)
QUERY = "\n| ".join(TENANT_USAGE_QUERY)
"""The query as Logs Insights and the dashboard hold it: its lines joined by `\\n| `."""


@pytest.fixture(scope="module")
def states(template: Any) -> dict[str, Any]:
    return dict(definition_from_template(template.to_json())["States"])


def dashboard_body(resources: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's JSON, each CloudFormation token inside it read as `TOKEN`."""
    ((_, dashboard),) = of_type(resources, "AWS::CloudWatch::Dashboard").items()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    return dict(json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts)))


def widget(resources: dict[str, Any], title: str) -> dict[str, Any]:
    widgets = dashboard_body(resources)["widgets"]
    (found,) = [w for w in widgets if title in w["properties"].get("title", "")]
    return dict(found)


def cache_widget(resources: dict[str, Any]) -> dict[str, Any]:
    return dict(widget(resources, "cached share")["properties"])


@pytest.fixture(scope="module")
def named_resources() -> dict[str, Any]:
    """The stack synthesised with two tenants named in TENANT_USAGE_METRICS."""
    _, template = synthesise({"TENANT_USAGE_METRICS": "acme,globex-legal"})
    return dict(template.to_json()["Resources"])


def test_the_model_step_selects_bedrocks_usage_whole(states):
    ask = states["AskTheModel"]
    assert ask["Resource"].endswith(":states:::aws-sdk:bedrockruntime:converse")
    assert ask["ResultSelector"] == {
        "content.$": "$.Output.Message.Content",
        "stopReason.$": "$.StopReason",
        # Not its members: a path to a cache member Bedrock left out would fail the state.
        "usage.$": "$.Usage",
    }
    assert ask["ResultPath"] == "$.model"


def test_the_reply_is_recorded_with_the_usage_beside_it(states):
    parameters = states["RecordTheReply"]["Parameters"]  # the payload, as the Lambda takes it
    assert parameters["action"] == "record"
    assert parameters["modelReply.$"] == "$.model"


def test_the_dashboard_graphs_the_cached_share_of_the_prompt_over_every_tenant(resources):
    properties = cache_widget(resources)
    lines = properties["metrics"]
    service_wide = [
        ["ConversationMemory", name, "service", "converse-history"] for name in USAGE_METRICS
    ]
    series = {tuple(line[:4]): line[4] for line in lines if isinstance(line[0], str)}
    assert set(series) == {tuple(line) for line in service_wide}
    assert all(options["stat"] == "Sum" for options in series.values())
    by_id = {options["id"]: key[1] for key, options in series.items() if "id" in options}
    assert by_id == {
        "input": "InputTokens",
        "cacheRead": "CacheReadInputTokens",
        "cacheWrite": "CacheWriteInputTokens",
    }
    (share,) = [line[0] for line in lines if isinstance(line[0], dict)]
    assert share["expression"] == "100 * cacheRead / (input + cacheRead + cacheWrite)"
    assert share.get("yAxis", "left") == "left"
    assert properties["yAxis"]["left"]["min"] == 0
    assert properties["yAxis"]["left"]["max"] == 100
    # The four figures themselves, on the right.
    assert {key[1] for key, options in series.items() if options.get("yAxis") == "right"} == set(
        USAGE_METRICS
    )


def test_by_default_the_dashboard_looks_for_no_tenant_metric(resources):
    body = json.dumps(dashboard_body(resources))
    assert "SEARCH(" not in body
    metric_lines = [
        line
        for w in dashboard_body(resources)["widgets"]
        for line in w["properties"].get("metrics", [])
    ]
    assert not [line for line in metric_lines if TENANT_DIMENSION in line]
    assert "TENANT_USAGE_METRICS" not in body
    for function in of_type(resources, "AWS::Lambda::Function").values():
        assert function["Properties"]["Environment"]["Variables"]["TENANT_USAGE_METRICS"] == ""


def test_the_dashboard_sums_the_usage_per_tenant_from_the_history_lambdas_log(resources):
    found = widget(resources, "by tenant")
    assert found["type"] == "log"
    assert found["properties"]["view"] == "table"
    assert found["properties"]["query"] == f"SOURCE 'TOKEN' | {QUERY}"
    # The TOKEN is the history Lambda's log group, the one its function writes to.
    ((_, dashboard),) = of_type(resources, "AWS::CloudWatch::Dashboard").items()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    [source] = [p for i, p in enumerate(parts) if i and str(parts[i - 1]).endswith("SOURCE '")]
    [history] = [
        f
        for f in of_type(resources, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"].startswith("converse_history.")
    ]
    assert source == history["Properties"]["LoggingConfig"]["LogGroup"]


def test_the_query_sums_the_fields_of_the_line_the_lambda_logs():
    stream = io.StringIO()
    logger = Logger(service="q", logger_handler=logging.StreamHandler(stream))
    telemetry = PowertoolsTelemetry(logger, Metrics(namespace="Q", service="q"))
    telemetry.reply_usage(ConversationKey("acme", "c1"), TokenUsage(120, 30, 2_150, 1_800, 200))
    [line] = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert line["message"] == REPLY_USAGE
    assert f'filter message = "{line["message"]}"' in QUERY
    summed = re.findall(r"sum\((\w+)\)", QUERY)
    assert sorted(summed) == sorted(
        ["inputTokens", "cacheReadInputTokens", "cacheWriteInputTokens", "outputTokens"]
    )
    assert {name: line[name] for name in summed} == {
        "inputTokens": 120,
        "cacheReadInputTokens": 1_800,
        "cacheWriteInputTokens": 200,
        "outputTokens": 30,
    }
    assert QUERY.split("\n")[1].endswith(f"by {TENANT_DIMENSION}")
    assert line[TENANT_DIMENSION] == "acme"


def test_the_readme_gives_the_dashboards_query():
    assert f"```\n{QUERY}\n```" in README.read_text()


def test_tenants_named_in_the_setting_get_a_graph_of_their_own_metrics(named_resources):
    found = widget(named_resources, "named in TENANT_USAGE_METRICS")["properties"]
    expressions = {line[0]["expression"]: line[0] for line in found["metrics"]}
    assert set(expressions) == {SEARCH.format(name=name) for name in USAGE_METRICS}
    output = expressions[SEARCH.format(name="OutputTokens")]
    assert output["yAxis"] == "right"
    assert all(line["label"].startswith("${PROP('Dim.tenant')}") for line in expressions.values())
    for function in of_type(named_resources, "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["TENANT_USAGE_METRICS"] == "acme,globex-legal"


def test_the_searched_metrics_are_the_ones_the_history_lambda_emits():
    assert (METRICS_NAMESPACE, HISTORY_SERVICE, TENANT_DIMENSION) == (
        "ConversationMemory",
        "converse-history",
        "tenant",
    )
    assert set(USAGE_METRICS) == {
        "InputTokens",
        "CacheReadInputTokens",
        "CacheWriteInputTokens",
        "OutputTokens",
    }
