"""Nothing fails silently: alarms on the API's 5xx and the workflow's failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import flatten, of_type


def only(resources: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    ((name, resource),) = of_type(resources, kind).items()
    return name, resource


def alarms_on(resources: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    return [
        a["Properties"]
        for a in of_type(resources, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
    ]


def dimensions(alarm: dict[str, Any]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in alarm["Dimensions"]}


def fires_on_any(alarm: dict[str, Any]) -> None:
    """Sum over five minutes, above zero: a single failure raises it."""
    assert alarm["Statistic"] == "Sum"
    assert alarm["Period"] == 300
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["EvaluationPeriods"] == 1


# -- alarms ----------------------------------------------------------------------------


def test_a_5xx_answered_by_the_api_stage_raises_an_alarm(resources):
    # The Lambda answers its own faults with a 500, which its Errors metric never counts.
    # HTTP APIs name the metric `5xx`, by ApiId and Stage (not the REST API's ApiName).
    (alarm,) = alarms_on(resources, "5xx")
    assert alarm["Namespace"] == "AWS/ApiGateway"
    api, _ = only(resources, "AWS::ApiGatewayV2::Api")
    _, stage = only(resources, "AWS::ApiGatewayV2::Stage")
    assert stage["Properties"]["StageName"] == "$default"
    assert dimensions(alarm) == {"ApiId": {"Ref": api}, "Stage": "$default"}
    fires_on_any(alarm)


@pytest.mark.parametrize("metric", ["ExecutionsFailed", "ExecutionsTimedOut"])
def test_a_failed_or_timed_out_converse_execution_raises_an_alarm(resources, metric):
    (alarm,) = alarms_on(resources, metric)
    assert alarm["Namespace"] == "AWS/States"
    state_machine, _ = only(resources, "AWS::StepFunctions::StateMachine")
    assert dimensions(alarm) == {"StateMachineArn": {"Ref": state_machine}}
    fires_on_any(alarm)


def test_the_dashboard_shows_the_api_responses_and_the_workflow_executions(resources):
    _, dashboard = only(resources, "AWS::CloudWatch::Dashboard")
    body = flatten(dashboard["Properties"]["DashboardBody"])
    api, _ = only(resources, "AWS::ApiGatewayV2::Api")
    this_stage = f'"ApiId","{json.dumps({"Ref": api})}","Stage","$default"'
    for metric in (
        f'"AWS/ApiGateway","4xx",{this_stage}',
        f'"AWS/ApiGateway","5xx",{this_stage}',
        f'"AWS/ApiGateway","Count",{this_stage}',
        '"AWS/States","ExecutionsStarted"',
        '"AWS/States","ExecutionsSucceeded"',
        '"AWS/States","ExecutionsFailed"',
        '"AWS/States","ExecutionsTimedOut"',
    ):
        assert metric in body
