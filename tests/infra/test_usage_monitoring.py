"""The model's usage, from Bedrock's answer to the dashboard: the workflow selects it whole,
and a widget graphs the share of prompt tokens read from the cache, over every tenant."""

from __future__ import annotations

import json
from typing import Any

import pytest

from converse_history.telemetry import TENANT_DIMENSION, USAGE_METRICS
from infra.service_function import HISTORY_SERVICE, METRICS_NAMESPACE
from tests.infra.conftest import of_type
from tests.support.local_state_machine import definition_from_template

SEARCH = (
    'SUM(SEARCH(\'{{ConversationMemory,service,tenant}} MetricName="{name}" '
    "service=\"converse-history\"', 'Sum', 300))"
)


@pytest.fixture(scope="module")
def states(template: Any) -> dict[str, Any]:
    return dict(definition_from_template(template.to_json())["States"])


def dashboard_body(resources: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's JSON, each CloudFormation token inside it read as `TOKEN`."""
    ((_, dashboard),) = of_type(resources, "AWS::CloudWatch::Dashboard").items()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    return dict(json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts)))


def cache_widget(resources: dict[str, Any]) -> dict[str, Any]:
    widgets = dashboard_body(resources)["widgets"]
    (widget,) = [w for w in widgets if "cached share" in w["properties"].get("title", "")]
    return dict(widget["properties"])


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
    widget = cache_widget(resources)
    lines = [line[0] for line in widget["metrics"]]
    by_id = {line["id"]: line["expression"] for line in lines if "id" in line}
    assert by_id == {
        "input": SEARCH.format(name="InputTokens"),
        "cacheRead": SEARCH.format(name="CacheReadInputTokens"),
        "cacheWrite": SEARCH.format(name="CacheWriteInputTokens"),
    }
    (share,) = [line for line in lines if "cacheRead /" in line["expression"]]
    assert share["expression"] == "100 * cacheRead / (input + cacheRead + cacheWrite)"
    assert share.get("yAxis", "left") == "left"
    assert widget["yAxis"]["left"]["min"] == 0
    assert widget["yAxis"]["left"]["max"] == 100
    # The four figures themselves, on the right.
    right = {line["expression"] for line in lines if line.get("yAxis") == "right"}
    assert right == {
        SEARCH.format(name=name)
        for name in (
            "InputTokens",
            "CacheReadInputTokens",
            "CacheWriteInputTokens",
            "OutputTokens",
        )
    }


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
