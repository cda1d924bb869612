"""Nothing fails silently: alarms on the API's 5xx and the workflow's failures, and
API Gateway's own refusals in the API's `{"error": {"code", "message"}}` shape."""

from __future__ import annotations

import json
import re
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
    (alarm,) = alarms_on(resources, "5XXError")
    assert alarm["Namespace"] == "AWS/ApiGateway"
    _, api = only(resources, "AWS::ApiGateway::RestApi")
    stage, _ = only(resources, "AWS::ApiGateway::Stage")
    assert dimensions(alarm) == {"ApiName": api["Properties"]["Name"], "Stage": {"Ref": stage}}
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
    for metric in (
        '"AWS/ApiGateway","4XXError"',
        '"AWS/ApiGateway","5XXError"',
        '"AWS/States","ExecutionsStarted"',
        '"AWS/States","ExecutionsSucceeded"',
        '"AWS/States","ExecutionsFailed"',
        '"AWS/States","ExecutionsTimedOut"',
    ):
        assert metric in body


# -- gateway responses -----------------------------------------------------------------

# The Lambda's codes where the meaning is the same (errors.py, http_routes.py,
# proxy_event.py, service.py).
EXPECTED_CODES = {
    "DEFAULT_4XX": "request_refused",
    "DEFAULT_5XX": "internal_error",
    "ACCESS_DENIED": "forbidden",
    "INVALID_SIGNATURE": "unauthenticated",
    "EXPIRED_TOKEN": "unauthenticated",
    "MISSING_AUTHENTICATION_TOKEN": "unsigned_or_unknown_route",
    "BAD_REQUEST_BODY": "invalid_request",
    "BAD_REQUEST_PARAMETERS": "invalid_request",
    "RESOURCE_NOT_FOUND": "not_found",
    "UNSUPPORTED_MEDIA_TYPE": "unsupported_media_type",
    "THROTTLED": "rate_limited",
    "INTEGRATION_TIMEOUT": "timeout",
}

# Messages as the gateway writes them, and ones that would break a body built by
# pasting `$context.error.message` between quotes.
SAMPLE_MESSAGES = [
    "Missing Authentication Token",
    'User: arn:aws:sts::123456789012:assumed-role/caller/"x" is not authorized to '
    "perform: execute-api:Invoke",
    'a backslash \\ and a quote " and a newline\nand a tab\t',
]

VARIABLE = re.compile(r"\$(?:\{context\.([A-Za-z.]+)\}|context\.([A-Za-z.]+))")


def render(template: str, response_type: str, message: str) -> str:
    """API Gateway's plain `$context` substitution (gateway response templates are not
    VTL): `messageString` is the message as a quoted JSON string, `message` is raw.
    A variable this does not know fails the test rather than passing unchecked."""
    context = {
        "error.message": message,
        "error.messageString": json.dumps(message),
        "error.responseType": response_type,
    }
    return VARIABLE.sub(lambda m: context[m.group(1) or m.group(2)], template)


@pytest.fixture(scope="module")
def gateway_responses(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for response in of_type(resources, "AWS::ApiGateway::GatewayResponse").values():
        properties = response["Properties"]
        assert properties["ResponseType"] not in found, "one response per type"
        found[properties["ResponseType"]] = properties
    return found


def test_the_gateway_answers_each_refusal_type_with_its_code(gateway_responses):
    codes = {
        kind: json.loads(render(r["ResponseTemplates"]["application/json"], kind, "m"))["error"][
            "code"
        ]
        for kind, r in gateway_responses.items()
    }
    assert codes == EXPECTED_CODES


@pytest.mark.parametrize("response_type", sorted(EXPECTED_CODES))
@pytest.mark.parametrize("message", SAMPLE_MESSAGES)
def test_a_gateway_refusal_is_the_apis_json_error_for_any_message(
    gateway_responses, response_type, message
):
    response = gateway_responses[response_type]
    assert response["ResponseParameters"] == {
        "gatewayresponse.header.Content-Type": "'application/json'"
    }
    ((content_type, template),) = response["ResponseTemplates"].items()
    assert content_type == "application/json"
    body = json.loads(render(template, response_type, message))
    assert body == {
        "error": {"code": EXPECTED_CODES[response_type], "message": body["error"]["message"]}
    }
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    if "messageString" in template:
        assert body["error"]["message"] == message


@pytest.mark.parametrize("response_type", sorted(EXPECTED_CODES))
def test_each_refusal_keeps_its_own_status(gateway_responses, response_type):
    # A status on DEFAULT_4XX/5XX would replace the status of every type falling back on
    # it (403, 429, 504 all alike); the specific types keep their documented statuses.
    assert "StatusCode" not in gateway_responses[response_type]


def test_changing_the_gateway_responses_redeploys_the_stage(resources):
    # Gateway responses take effect on the next deployment: the stage's deployment
    # must wait for them (CDK also folds them into its logical id).
    _, deployment = only(resources, "AWS::ApiGateway::Deployment")
    responses = of_type(resources, "AWS::ApiGateway::GatewayResponse")
    assert set(responses) <= set(deployment["DependsOn"])
