"""The deployed API refuses as the Lambda does: bodies as sent, 405 for a wrong method,
HEAD on health.

API Gateway answers a method a resource does not declare with its own 403
"Missing Authentication Token", and a HEAD is not a GET to it; it decodes a
text body as UTF-8, with U+FFFD for the bytes that are not. The template must
route around all three.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

from tests.infra.conftest import flatten, of_type, synthesise

CONTACTS = "/v1/tenants/{tenantId}/contacts"
CONTACT = f"{CONTACTS}/{{contactId}}"
ROUTES = {
    CONTACTS: "GET",
    CONTACT: "DELETE",
    f"{CONTACT}/converse": "POST",
    f"{CONTACT}/turns": "GET, POST",
    f"{CONTACT}/memory": "GET",
    "/health": "GET, HEAD",
}
"""Each route's `Allow`, as the Lambda answers it (tests/integration/test_request_edges.py)."""

DATA_ROUTES = [(f"{CONTACT}/turns", "GET"), (CONTACTS, "GET"), (CONTACT, "DELETE")]
"""A conversation's data (SPEC 10): its export, the tenant's contacts, the erase."""

GATEWAY_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
"""The methods API Gateway's `ANY` stands for."""


def resource_path(resources: dict[str, Any], resource_id: Any) -> str:
    """A resource's full path, from its PathPart and its parents'."""
    if "Fn::GetAtt" in resource_id:  # the root resource
        return ""
    resource = resources[resource_id["Ref"]]["Properties"]
    return f"{resource_path(resources, resource['ParentId'])}/{resource['PathPart']}"


@pytest.fixture(scope="module")
def methods(resources: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Path -> HTTP method (ANY included) -> the method's properties."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for method in of_type(resources, "AWS::ApiGateway::Method").values():
        props = method["Properties"]
        path = resource_path(resources, props["ResourceId"])
        found.setdefault(path, {})[props["HttpMethod"]] = props
    return found


def render(template: str, method: str) -> str:
    """The mapping template for a request with `method`; any other variable fails the test."""
    variables = {"context.httpMethod": method}
    return re.sub(r"\$(context\.[A-Za-z.]+)", lambda m: variables[m.group(1)], template)


# -- bodies as sent ------------------------------------------------------------------


def test_json_bodies_reach_the_lambda_as_the_bytes_sent(resources):
    (api,) = of_type(resources, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["BinaryMediaTypes"] == ["application/json"]


def test_the_lambda_routes_keep_their_proxy_integration(methods):
    """A Lambda proxy integration passes a binary body base64-encoded, untouched: no
    content handling converts it, and the handler decodes it."""
    for path, allow in ROUTES.items():
        for method in allow.split(", "):
            integration = methods[path][method]["Integration"]
            assert integration["Type"] == "AWS_PROXY", (path, method)
            assert "ContentHandling" not in integration, (path, method)


# -- methods -------------------------------------------------------------------------


def test_every_route_declares_its_methods_and_any_for_the_rest(methods):
    routed = {path: set(declared) for path, declared in methods.items()}
    assert routed == {path: {*allow.split(", "), "ANY"} for path, allow in ROUTES.items()}


@pytest.mark.parametrize(("path", "method"), DATA_ROUTES)
def test_the_data_routes_are_iam_signed_lambda_proxies_like_converse(methods, path, method):
    """The same Lambda, by the same proxy integration, as converse; the tenant's (and the
    contact's) id required in the path; `limit` and `cursor` left to the Lambda, which
    answers 400 naming the field (a gateway refusal would not say which)."""
    converse = methods[f"{CONTACT}/converse"]["POST"]
    props = methods[path][method]

    assert props["AuthorizationType"] == "AWS_IAM"
    assert props["Integration"] == converse["Integration"]
    assert props["Integration"]["Type"] == "AWS_PROXY"
    assert props["Integration"]["IntegrationHttpMethod"] == "POST"
    assert props["RequestValidatorId"] == converse["RequestValidatorId"]
    ids = ["tenantId", "contactId"] if "{contactId}" in path else ["tenantId"]
    assert props["RequestParameters"] == {f"method.request.path.{i}": True for i in ids}
    assert "RequestModels" not in props  # no body to model


@pytest.mark.parametrize(("path", "method"), DATA_ROUTES)
def test_the_lambda_may_be_invoked_for_the_data_routes(resources, path, method):
    """API Gateway may invoke the Lambda for the route: from the stage and from the
    console's test invocation, and for that method and path only."""
    route = "/" + method + re.sub(r"\{[A-Za-z]+\}", "*", path)
    sources = [
        flatten(p["Properties"].get("SourceArn"))
        for p in of_type(resources, "AWS::Lambda::Permission").values()
    ]
    routed = [source for source in sources if source.endswith(route)]
    assert len(routed) == 2, route
    assert sum("/test-invoke-stage/" in source for source in routed) == 1


def test_head_on_health_is_public_and_reaches_the_same_lambda_as_get(methods):
    get, head = methods["/health"]["GET"], methods["/health"]["HEAD"]
    assert head["AuthorizationType"] == "NONE"
    assert head["Integration"] == get["Integration"]


def test_the_lambda_may_be_invoked_for_head_on_health(resources):
    sources = [
        json.dumps(p["Properties"].get("SourceArn"))
        for p in of_type(resources, "AWS::Lambda::Permission").values()
    ]
    assert any("/HEAD/health" in source for source in sources)


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_any_other_method_is_answered_405_with_allow_by_the_gateway(methods, path):
    allow = ROUTES[path]
    any_method = methods[path]["ANY"]
    integration = any_method["Integration"]

    # A MOCK: no Lambda runs, nothing is read, so no signature is asked for.
    assert integration["Type"] == "MOCK"
    assert any_method["AuthorizationType"] == "NONE"
    assert json.loads(integration["RequestTemplates"]["application/json"]) == {"statusCode": 405}
    # application/json is binary: a MOCK's templates need the payloads as text, both ways.
    assert integration["ContentHandling"] == "CONVERT_TO_TEXT"
    assert integration["PassthroughBehavior"] == "NEVER"
    (response,) = integration["IntegrationResponses"]
    assert response["StatusCode"] == "405"
    assert "SelectionPattern" not in response  # the default: whatever the MOCK says
    assert response["ContentHandling"] == "CONVERT_TO_TEXT"
    assert response["ResponseParameters"] == {"method.response.header.Allow": f"'{allow}'"}
    (declared,) = any_method["MethodResponses"]
    assert declared == {
        "StatusCode": "405",
        "ResponseParameters": {"method.response.header.Allow": True},
    }


@pytest.mark.parametrize(
    ("path", "method"),
    [(p, m) for p in sorted(ROUTES) for m in GATEWAY_METHODS if m not in ROUTES[p].split(", ")],
)
def test_the_405_body_is_the_lambdas_error_naming_the_method(methods, path, method):
    (response,) = methods[path]["ANY"]["Integration"]["IntegrationResponses"]
    ((content_type, template),) = response["ResponseTemplates"].items()

    body = json.loads(render(template, method))

    assert content_type == "application/json"
    assert body == {
        "error": {
            "code": "method_not_allowed",
            "message": f"{method} is not allowed on {path}; use {ROUTES[path]}",
        }
    }


def test_only_the_routes_answer_405_an_unknown_path_is_still_the_gateways(methods):
    """/v1, /v1/tenants, ... serve nothing: no ANY there, the gateway's 403 stays."""
    assert set(methods) == set(ROUTES)


def test_only_health_and_the_405s_are_public(methods):
    """Every other method is IAM-signed. (The synth ran cdk-nag, app.py: the public ones
    passed it, each acknowledged with its reason.)"""
    public = {
        (path, method)
        for path, declared in methods.items()
        for method, props in declared.items()
        if props["AuthorizationType"] == "NONE"
    }
    assert public == {("/health", "GET"), ("/health", "HEAD")} | {(p, "ANY") for p in ROUTES}


def test_the_new_methods_are_part_of_the_stages_deployment(resources):
    (deployment,) = of_type(resources, "AWS::ApiGateway::Deployment").values()
    methods = {
        name
        for name, m in of_type(resources, "AWS::ApiGateway::Method").items()
        if m["Properties"]["HttpMethod"] in ("ANY", "HEAD")
    }
    assert len(methods) == 7  # an ANY on each of the six routes, HEAD on health
    assert methods <= set(deployment["DependsOn"])


def test_the_data_routes_are_part_of_the_stages_deployment(resources):
    (deployment,) = of_type(resources, "AWS::ApiGateway::Deployment").values()
    names = {
        (resource_path(resources, m["Properties"]["ResourceId"]), m["Properties"]["HttpMethod"]): n
        for n, m in of_type(resources, "AWS::ApiGateway::Method").items()
    }
    for route in DATA_ROUTES:
        assert names[route] in deployment["DependsOn"], route


def test_a_change_of_binary_media_types_alone_makes_a_new_deployment(monkeypatch, resources):
    (before,) = of_type(resources, "AWS::ApiGateway::Deployment")
    monkeypatch.setattr("infra.api.BINARY_MEDIA_TYPES", ("application/json", "text/plain"))
    for name in [n for n in os.environ if n.startswith(("AWS_", "CDK_DEFAULT"))]:
        monkeypatch.delenv(name)

    _, template = synthesise()

    (after,) = of_type(template.to_json()["Resources"], "AWS::ApiGateway::Deployment")
    assert after != before
