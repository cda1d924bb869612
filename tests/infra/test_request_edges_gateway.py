"""The deployed API leaves to the Lambda what the Lambda answers: a missing Content-Type,
an id its pattern refuses; a body over 10 MB is the gateway's own 413, at the Lambda's limit.

If the gateway answered these itself, it would answer them otherwise (a 400
"Missing required request parameters" for a missing header, its own body for
a 413), and the same request would be refused differently in AWS and locally.
"""

from __future__ import annotations

from typing import Any

from converse_history.proxy_event import MAX_BODY_BYTES
from tests.infra.conftest import of_type

API_GATEWAY_PAYLOAD_LIMIT = 10 * 1024 * 1024
"""API Gateway's REST payload quota (10 MB), which cannot be raised."""

TENANT_ID = {"method.request.path.tenantId": True}
PATH_IDS = {**TENANT_ID, "method.request.path.contactId": True}


def _lambda_methods(resources: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        method["Properties"]
        for method in of_type(resources, "AWS::ApiGateway::Method").values()
        if method["Properties"]["Integration"].get("Type") == "AWS_PROXY"
        and method["Properties"]["HttpMethod"] in ("GET", "POST", "DELETE")
        and "RequestParameters" in method["Properties"]
    ]


def test_the_gateway_requires_no_header_so_a_missing_content_type_is_the_lambdas_415(resources):
    """Only the path ids are required parameters: a required `Content-Type` would make the
    validator answer a POST without one 400, where the Lambda (and the local runner) say 415.
    Nor is a query string (`limit`, `cursor`): the Lambda answers 400 naming the field."""
    methods = _lambda_methods(resources)
    # converse, record a turn, memory, export, erase; and the tenant's contacts
    assert len(methods) == 6
    listings = [m for m in methods if m["RequestParameters"] == TENANT_ID]
    assert [m["HttpMethod"] for m in listings] == ["GET"]
    for method in methods:
        if method not in listings:
            assert method["RequestParameters"] == PATH_IDS, method["HttpMethod"]


def test_the_bodies_are_modelled_as_application_json_only(resources):
    """A body of another type, or of none, is not validated as JSON by the gateway: it
    reaches the Lambda, which refuses it 415 with the type named."""
    for method in _lambda_methods(resources):
        if method["HttpMethod"] == "POST":
            assert set(method["RequestModels"]) == {"application/json"}


def test_the_413_over_10_mb_is_left_to_the_gateway_at_the_lambdas_limit(resources):
    response_types = {
        response["Properties"]["ResponseType"]
        for response in of_type(resources, "AWS::ApiGateway::GatewayResponse").values()
    }
    assert "REQUEST_TOO_LARGE" not in response_types  # API Gateway does not apply it
    assert MAX_BODY_BYTES == API_GATEWAY_PAYLOAD_LIMIT
