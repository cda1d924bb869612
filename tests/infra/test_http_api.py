"""The HTTP API: its routes, who may call them, the one Lambda integration behind them,
and the `$default` stage's throttle and access logs.

Every route the Lambda serves has a route of its own, signed with SigV4 but
for health; `$default` passes what no route matches to the same Lambda, which
answers 404 or 405 with `Allow`.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import Any, cast

import pytest
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_lambda_powertools import Logger

from converse_history.http_routes import BASE, build_resolver
from converse_history.proxy_event import MAX_BODY_BYTES
from infra import api as api_module
from infra.api import ACCESS_LOG_FIELDS, Api
from tests.infra.conftest import flatten, of_type, synthesise

CONTACTS = "/v1/tenants/{tenantId}/contacts"
CONTACT = f"{CONTACTS}/{{contactId}}"
SIGNED = {
    f"POST {CONTACT}/converse",
    f"POST {CONTACT}/turns",
    f"GET {CONTACT}/turns",
    f"GET {CONTACT}/memory",
    f"GET {CONTACT}/window",
    f"POST {CONTACT}/recall",
    f"DELETE {CONTACT}",
    f"GET {CONTACTS}",
}
"""The routes a caller signs with SigV4 (IAM)."""

PUBLIC = {"GET /health", "HEAD /health", "$default"}
"""The routes without authorisation: the health probe, and what no route matches."""

HTTP_API_PAYLOAD_LIMIT = 10 * 1024 * 1024
"""API Gateway's HTTP API payload quota (10 MB), which cannot be raised."""


def only(resources: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    ((name, resource),) = of_type(resources, kind).items()
    return name, resource["Properties"]


@pytest.fixture(scope="module")
def routes(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Route key -> the route's properties."""
    found: dict[str, dict[str, Any]] = {}
    for route in of_type(resources, "AWS::ApiGatewayV2::Route").values():
        props = route["Properties"]
        assert props["RouteKey"] not in found, "one route per key"
        found[props["RouteKey"]] = props
    return found


def gateway_path(resolver_path: str) -> str:
    """A Powertools path (`<tenant_id>`) as the gateway's route spells it (`{tenantId}`)."""

    def camel(match: re.Match[str]) -> str:
        first, *rest = match.group(1).split("_")
        return "{" + first + "".join(word.title() for word in rest) + "}"

    return re.sub(r"<(\w+)>", camel, resolver_path)


def resolver_routes() -> set[str]:
    """`METHOD /path` of every route the converse-history Lambda's resolver serves."""
    resolver = build_resolver(
        cast(Any, None), cast(Any, None), identity_required=True, logger=Logger(service="test")
    )
    served = resolver._static_routes + resolver._dynamic_routes
    return {f"{route.method} {gateway_path(route.path)}" for route in served}


# -- the route table ---------------------------------------------------------------------


def test_the_route_table_is_the_signed_routes_health_and_default(routes):
    assert set(routes) == SIGNED | PUBLIC


def test_every_route_the_lambda_serves_has_its_own_route(routes):
    """`/openapi.json` is the one exception: it has no route, so it reaches the Lambda
    through `$default`, unsigned (it describes the API and reads no tenant data)."""
    assert gateway_path(BASE) == CONTACT
    served = resolver_routes()
    assert served - set(routes) == {"GET /openapi.json"}
    assert set(routes) - served == {"$default"}


def test_the_construct_keeps_each_route_by_its_key(synthesised, routes):
    stack, _ = synthesised
    api = stack.api
    assert isinstance(api, Api)
    assert set(api.routes) == set(routes)
    assert all(isinstance(route, apigwv2.HttpRoute) for route in api.routes.values())


@pytest.mark.parametrize("key", sorted(SIGNED))
def test_each_data_route_requires_a_sigv4_signature(routes, key):
    assert routes[key]["AuthorizationType"] == "AWS_IAM"
    assert "AuthorizerId" not in routes[key]


@pytest.mark.parametrize("key", sorted(PUBLIC))
def test_health_and_default_take_no_authorisation(routes, key):
    assert routes[key]["AuthorizationType"] == "NONE"


def test_only_health_and_default_are_public(routes):
    public = {key for key, props in routes.items() if props["AuthorizationType"] != "AWS_IAM"}
    assert public == PUBLIC


# -- the integration ---------------------------------------------------------------------


def test_every_route_targets_the_one_integration(resources, routes):
    integration, _ = only(resources, "AWS::ApiGatewayV2::Integration")
    target = {"Fn::Join": ["", ["integrations/", {"Ref": integration}]]}
    for key, props in routes.items():
        assert props["Target"] == target, key


def test_the_integration_is_a_payload_2_lambda_proxy_to_the_live_alias(resources):
    api, _ = only(resources, "AWS::ApiGatewayV2::Api")
    _, integration = only(resources, "AWS::ApiGatewayV2::Integration")
    alias, alias_props = only(resources, "AWS::Lambda::Alias")
    history = [
        name
        for name, f in of_type(resources, "AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == "converse_history.handler.lambda_handler"
    ]

    assert integration["ApiId"] == {"Ref": api}
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert integration["PayloadFormatVersion"] == "2.0"
    assert integration["IntegrationUri"] == {"Ref": alias}
    assert alias_props["FunctionName"] == {"Ref": history[0]}
    assert alias_props["Name"] == "live"
    # No parameter mapping: the Lambda gets the request as the client sent it.
    assert "RequestParameters" not in integration


def test_the_lambda_may_be_invoked_for_every_route(resources, routes):
    """The ARN API Gateway presents for a route (`<api>/<stage>/<method><path>`, or
    `<api>/<stage>/$default`) matches a permission's SourceArn, as ArnLike reads `*`."""
    api, _ = only(resources, "AWS::ApiGatewayV2::Api")
    alias, _ = only(resources, "AWS::Lambda::Alias")
    permissions = [
        p["Properties"]
        for p in of_type(resources, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert permissions
    assert all(p["FunctionName"] == {"Ref": alias} for p in permissions)
    assert all(p["Action"] == "lambda:InvokeFunction" for p in permissions)
    sources = [flatten(p["SourceArn"]) for p in permissions]
    prefix = flatten(
        {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":execute-api:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    ":",
                    {"Ref": api},
                ],
            ]
        }
    )
    assert all(source.startswith(prefix + "/") for source in sources)
    for key in routes:
        method, _, path = key.partition(" ")
        called = f"{prefix}/$default/" + (f"{method}{path}" if path else "$default")
        assert any(fnmatchcase(called, source) for source in sources), key


def test_the_api_keeps_its_execute_api_endpoint_and_has_no_cors(resources):
    _, api = only(resources, "AWS::ApiGatewayV2::Api")
    assert api["ProtocolType"] == "HTTP"
    assert api["DisableExecuteApiEndpoint"] is False
    assert "CorsConfiguration" not in api


def test_the_413_over_10_mb_is_the_gateways_at_the_lambdas_limit():
    assert MAX_BODY_BYTES == HTTP_API_PAYLOAD_LIMIT


def test_no_api_gateway_v1_resource_remains(resources):
    """No REST API, stage, method, gateway response or account logging role is left."""
    rest = {r["Type"] for r in resources.values() if r["Type"].startswith("AWS::ApiGateway::")}
    assert rest == set()


# -- the stage ---------------------------------------------------------------------------


def test_the_one_stage_is_default_and_deploys_itself(resources):
    api, _ = only(resources, "AWS::ApiGatewayV2::Api")
    _, stage = only(resources, "AWS::ApiGatewayV2::Stage")
    assert stage["ApiId"] == {"Ref": api}
    assert stage["StageName"] == "$default"
    assert stage["AutoDeploy"] is True
    assert not of_type(resources, "AWS::ApiGatewayV2::Deployment")


def test_the_stage_throttles_at_the_default_limits_without_billed_route_metrics(resources):
    _, stage = only(resources, "AWS::ApiGatewayV2::Stage")
    assert stage["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": 50,
        "ThrottlingBurstLimit": 100,
        "DetailedMetricsEnabled": False,
    }


def test_the_access_log_is_one_json_object_of_the_fields_in_order(resources):
    _, stage = only(resources, "AWS::ApiGatewayV2::Stage")
    text = stage["AccessLogSettings"]["Format"]
    logged = json.loads(text)
    assert logged == dict(ACCESS_LOG_FIELDS)
    assert list(logged) == [name for name, _ in ACCESS_LOG_FIELDS]
    assert "$context.requestId" in text  # API Gateway refuses a format without it


def test_the_access_log_goes_to_its_group_with_the_configured_retention(resources):
    _, stage = only(resources, "AWS::ApiGatewayV2::Stage")
    destination = stage["AccessLogSettings"]["DestinationArn"]
    (group, attribute) = destination["Fn::GetAtt"]
    assert attribute == "Arn"
    assert resources[group]["Type"] == "AWS::Logs::LogGroup"
    assert "AccessLogs" in group
    assert resources[group]["Properties"]["RetentionInDays"] == 30


@pytest.fixture(scope="module")
def configured() -> dict[str, Any]:
    """The stack synthesised with limits and a retention of its own."""
    _, template = synthesise({"apiRateLimit": "7", "apiBurstLimit": "9", "logRetentionDays": "90"})
    return dict(template.to_json()["Resources"])


def test_the_stage_takes_its_throttle_from_the_config(configured):
    _, stage = only(configured, "AWS::ApiGatewayV2::Stage")
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] == 7
    assert stage["DefaultRouteSettings"]["ThrottlingBurstLimit"] == 9


def test_the_access_logs_take_their_retention_from_the_config(configured):
    _, stage = only(configured, "AWS::ApiGatewayV2::Stage")
    (group, _) = stage["AccessLogSettings"]["DestinationArn"]["Fn::GetAtt"]
    assert configured[group]["Properties"]["RetentionInDays"] == 90


def test_the_api_url_output_is_the_stages_root(template):
    """`$default` is served at the API's root: no stage name in the URL or the paths."""
    resources = template.to_json()["Resources"]
    api, _ = only(resources, "AWS::ApiGatewayV2::Api")
    url = template.to_json()["Outputs"]["ApiUrl"]["Value"]
    assert url == {
        "Fn::Join": [
            "",
            [
                "https://",
                {"Ref": api},
                ".execute-api.",
                {"Ref": "AWS::Region"},
                ".",
                {"Ref": "AWS::URLSuffix"},
                "/",
            ],
        ]
    }


# -- cdk-nag -----------------------------------------------------------------------------


def nag_findings(error: BaseException) -> set[tuple[str, str]]:
    """(construct path, rule) of each finding in a failed synth's report."""
    found = re.findall(
        r"^\s+(ConversationMemory/\S+) \S+\n\s+Acknowledge with 'AwsSolutions::(\S+)'",
        str(error),
        flags=re.MULTILINE,
    )
    return set(found)


def test_cdk_nag_flags_the_public_routes_when_not_acknowledged(monkeypatch):
    """The synth passes (the fixture ran cdk-nag) because each public route is
    acknowledged with its reason; without that, exactly those three fail it."""
    monkeypatch.setattr(Api, "_acknowledge_public", staticmethod(lambda route, reason: None))
    with pytest.raises(RuntimeError, match="ValidationFailed") as failed:
        synthesise()
    assert nag_findings(failed.value) == {
        ("ConversationMemory/Api/Health/Resource", "AwsSolutions-APIG4"),
        ("ConversationMemory/Api/HealthHead/Resource", "AwsSolutions-APIG4"),
        ("ConversationMemory/Api/Unmatched/Resource", "AwsSolutions-APIG4"),
    }


def test_an_unsigned_data_route_fails_the_synth(monkeypatch):
    """Only health and `$default` are acknowledged as public: a data route left without
    IAM would pass no review."""
    monkeypatch.setattr(api_module, "HttpIamAuthorizer", apigwv2.HttpNoneAuthorizer)
    with pytest.raises(RuntimeError, match="ValidationFailed") as failed:
        synthesise()
    assert {rule for _, rule in nag_findings(failed.value)} == {"AwsSolutions-APIG4"}
    assert len(nag_findings(failed.value)) == len(SIGNED)
