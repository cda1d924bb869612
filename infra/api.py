"""The REST API: the routes of SPEC 7 and 10, IAM on every route but health.

IAM authorisation tells the Lambda who called (`requestContext.identity`); the
Lambda maps that principal to the tenants it may act for, from the rules'
`callers` (SPEC 8), so a caller of tenant A asking for tenant B gets 403.

What API Gateway refuses itself, before the Lambda runs (a denied or unsigned
call, a body the validator rejects, throttling, a timeout, a method the route
does not serve), is answered in the same `{"error": {"code", "message"}}` shape
as the Lambda's refusals. What the gateway passes on, the Lambda refuses in
that shape: a POST without a Content-Type or of another type (a Lambda proxy
integration has no media type to refuse) is the Lambda's 415; an id the
resource path matched but its pattern does not (`a%01b`) the Lambda's 400. A
body over 10 MB is the gateway's own 413, whose body cannot be customised; the
Lambda and the local runner hold to the same limit in the API's shape.

`application/json` is a binary media type of the API: API Gateway would decode
a text body as UTF-8 and replace the bytes that are not with U+FFFD, so the
Lambda could not tell them from a client's own U+FFFD. As binary, the body
reaches the Lambda as sent (base64, `isBase64Encoded`), and the handler refuses
bytes that are not UTF-8. The Lambda's answers are text (`isBase64Encoded`
false), which API Gateway passes through whatever the client's Accept.
"""

from __future__ import annotations

import json

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from converse_history.api_models import BINARY_MEDIA_TYPES, MAX_BLOCKS
from infra.config import DeploymentConfig
from infra.log_retention import retention

MESSAGE_SCHEMA = apigateway.JsonSchema(
    type=apigateway.JsonSchemaType.OBJECT,
    properties={
        "id": apigateway.JsonSchema(type=apigateway.JsonSchemaType.STRING, max_length=128),
        "text": apigateway.JsonSchema(type=apigateway.JsonSchemaType.STRING, min_length=1),
        "content": apigateway.JsonSchema(
            type=apigateway.JsonSchemaType.ARRAY, min_items=1, max_items=MAX_BLOCKS
        ),
        "sentAt": apigateway.JsonSchema(type=apigateway.JsonSchemaType.STRING, max_length=40),
    },
)


# Gateway response templates get plain `$context` substitution, not VTL.
# `messageString` is the gateway's message already quoted as a JSON string, so
# a message holding quotes or backslashes still leaves the body valid JSON.
GATEWAY_MESSAGE = "$context.error.messageString"


def error_template(code: str, message: str = GATEWAY_MESSAGE) -> str:
    """The API's error body for a gateway response; `message` is a JSON value."""
    return '{"error": {"code": ' + json.dumps(code) + ', "message": ' + message + "}}"


# The refusals API Gateway makes itself, each with the code the Lambda uses for the
# same meaning. The status is left to the type's own (403, 400, 429, ...): setting
# one on DEFAULT_4XX/5XX would rewrite every type that falls back on them.
GATEWAY_RESPONSES: dict[str, tuple[apigateway.ResponseType, str]] = {
    # Any other 4xx (API keys, quotas, WAF: none configured here); the status says which.
    # REQUEST_TOO_LARGE (413) is not here: API Gateway does not apply its customisation.
    "Default4xx": (apigateway.ResponseType.DEFAULT_4_XX, "request_refused"),
    # The Lambda's 500 means the same: not the caller's fault, retry the same message id.
    "Default5xx": (apigateway.ResponseType.DEFAULT_5_XX, "internal_error"),
    # IAM denied the signed principal this route.
    "AccessDenied": (apigateway.ResponseType.ACCESS_DENIED, "forbidden"),
    # The signature or its credentials are bad: who called is unknown, so not `forbidden`.
    "InvalidSignature": (apigateway.ResponseType.INVALID_SIGNATURE, "unauthenticated"),
    "ExpiredToken": (apigateway.ResponseType.EXPIRED_TOKEN, "unauthenticated"),
    # API Gateway answers an unsigned call and an unknown path alike, with "Missing
    # Authentication Token": its message says both (GATEWAY_MESSAGES). A known path
    # asked with another method gets 405 (`Api._refuse_other_methods`).
    "MissingAuthenticationToken": (
        apigateway.ResponseType.MISSING_AUTHENTICATION_TOKEN,
        "unsigned_or_unknown_route",
    ),
    "BadRequestBody": (apigateway.ResponseType.BAD_REQUEST_BODY, "invalid_request"),
    "BadRequestParameters": (apigateway.ResponseType.BAD_REQUEST_PARAMETERS, "invalid_request"),
    "ResourceNotFound": (apigateway.ResponseType.RESOURCE_NOT_FOUND, "not_found"),
    "UnsupportedMediaType": (
        apigateway.ResponseType.UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    ),
    # The stage's throttle: like the Lambda's 429, nothing was recorded. No Retry-After:
    # the token bucket refills continuously, and one fixed value would have every
    # throttled caller retry at the same moment; callers back off with jitter instead.
    "Throttled": (apigateway.ResponseType.THROTTLED, "rate_limited"),
    # 504 after the gateway's 29 s: the turn may have been recorded, so its own code;
    # a retry with the same message id is answered the same, never stored twice.
    "IntegrationTimeout": (apigateway.ResponseType.INTEGRATION_TIMEOUT, "timeout"),
}
# Messages of our own where the gateway's would mislead; the others say what it says.
GATEWAY_MESSAGES = {
    "MissingAuthenticationToken": json.dumps(
        "the request is not signed with SigV4, or no route matches its path"
    ),
}


METHOD_NOT_ALLOWED_REQUEST = json.dumps({"statusCode": 405})
"""The MOCK integration's request template: the status it answers with."""


def method_not_allowed_template(path: str, allowed: str) -> str:
    """The 405's body, as the Lambda's: a mapping template (VTL) naming the method asked.

    `$context.httpMethod` is one of API Gateway's seven methods, so it needs no escaping.
    """
    message = f"$context.httpMethod is not allowed on {path}; use {allowed}"
    return error_template("method_not_allowed", json.dumps(message))


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        handler: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(config.log_retention_days)
        )
        self.rest_api = apigateway.RestApi(
            self,
            "Api",
            description="Conversation memory: bounded, Converse-ready histories",
            binary_media_types=list(BINARY_MEDIA_TYPES),
            cloud_watch_role=True,
            deploy_options=apigateway.StageOptions(
                stage_name=config.stage,
                access_log_destination=apigateway.LogGroupLogDestination(self.access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                # Method logs carry no bodies: data tracing stays off.
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                tracing_enabled=True,
                metrics_enabled=True,
                throttling_rate_limit=config.api_rate_limit,
                throttling_burst_limit=config.api_burst_limit,
            ),
        )
        # A deployment snapshots the API's settings: a change of binary media types
        # alone must make a new one, as a changed method or gateway response does.
        deployment = self.rest_api.latest_deployment
        assert deployment is not None  # `deploy` is left on: the stage has one
        deployment.add_to_logical_id({"binaryMediaTypes": list(BINARY_MEDIA_TYPES)})
        for name, (response_type, code) in GATEWAY_RESPONSES.items():
            message = GATEWAY_MESSAGES.get(name, GATEWAY_MESSAGE)
            self.rest_api.add_gateway_response(
                name,
                type=response_type,
                response_headers={"Content-Type": "'application/json'"},
                templates={"application/json": error_template(code, message)},
            )
        integration = apigateway.LambdaIntegration(handler)
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        converse_model = self.rest_api.add_model(
            "ConverseRequest",
            content_type="application/json",
            schema=apigateway.JsonSchema(
                schema=apigateway.JsonSchemaVersion.DRAFT4,
                type=apigateway.JsonSchemaType.OBJECT,
                required=["message"],
                properties={"message": MESSAGE_SCHEMA},
            ),
        )
        turn_model = self.rest_api.add_model(
            "RecordTurnRequest",
            content_type="application/json",
            schema=apigateway.JsonSchema(
                schema=apigateway.JsonSchemaVersion.DRAFT4,
                type=apigateway.JsonSchemaType.OBJECT,
                required=["role"],
                properties={
                    **(MESSAGE_SCHEMA.properties or {}),
                    "role": apigateway.JsonSchema(
                        type=apigateway.JsonSchemaType.STRING, enum=["assistant", "user"]
                    ),
                },
            ),
        )
        iam_auth = {
            "authorization_type": apigateway.AuthorizationType.IAM,
            "request_validator": validator,
        }
        path_parameters = {
            "method.request.path.tenantId": True,
            "method.request.path.contactId": True,
        }
        contacts = (
            self.rest_api.root.add_resource("v1")
            .add_resource("tenants")
            .add_resource("{tenantId}")
            .add_resource("contacts")
        )
        contact = contacts.add_resource("{contactId}")
        converse = contact.add_resource("converse")
        self.converse_method = converse.add_method(
            "POST",
            integration,
            request_models={"application/json": converse_model},
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        turns = contact.add_resource("turns")
        self.turns_method = turns.add_method(
            "POST",
            integration,
            request_models={"application/json": turn_model},
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        memory = contact.add_resource("memory")
        self.memory_method = memory.add_method(
            "GET",
            integration,
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        # A conversation's data (SPEC 10): its export, the tenant's contacts, the erase.
        # `limit` and `cursor` pass to the Lambda as sent: it answers 400 naming the field.
        self.export_method = turns.add_method(
            "GET",
            integration,
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        self.contacts_method = contacts.add_method(
            "GET",
            integration,
            request_parameters={"method.request.path.tenantId": True},
            **iam_auth,  # type: ignore[arg-type]
        )
        self.erase_method = contact.add_method(
            "DELETE",
            integration,
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        health = self.rest_api.root.add_resource("health")
        self.health_method = health.add_method(
            "GET", integration, authorization_type=apigateway.AuthorizationType.NONE
        )
        # API Gateway does not route a HEAD to a GET method: it needs its own. The
        # handler answers it as the GET, without the body (load balancers, uptime checks).
        self.health_head_method = health.add_method(
            "HEAD", integration, authorization_type=apigateway.AuthorizationType.NONE
        )
        self._acknowledge_public(self.health_head_method, "Health is a public probe; reads nothing")
        self.method_not_allowed = {
            resource.path: self._refuse_other_methods(resource)
            for resource in (contacts, contact, converse, turns, memory, health)
        }

    def _refuse_other_methods(self, resource: apigateway.Resource) -> apigateway.Method:
        """`ANY` on a route: the methods it does not serve get 405 with `Allow`, as from the
        Lambda, instead of API Gateway's 403 "Missing Authentication Token".

        API Gateway prefers a resource's own methods to its `ANY`, so `ANY` only ever
        sees the others. A MOCK answers it: no Lambda runs and no tenant data is
        reachable, so it needs no signature (the answer only repeats what the
        OpenAPI document says). With `application/json` a binary media type, a MOCK
        needs CONVERT_TO_TEXT both ways, or its templates meet bytes (a 500). A body
        of another type is refused 415 by the gateway, before the MOCK. `Allow` lists
        the methods the resource declares, so the two cannot disagree.
        """
        methods = [
            c.http_method for c in resource.node.children if isinstance(c, apigateway.Method)
        ]
        allowed = ", ".join(sorted(methods))
        integration = apigateway.MockIntegration(
            passthrough_behavior=apigateway.PassthroughBehavior.NEVER,
            content_handling=apigateway.ContentHandling.CONVERT_TO_TEXT,
            request_templates={"application/json": METHOD_NOT_ALLOWED_REQUEST},
            integration_responses=[
                apigateway.IntegrationResponse(
                    status_code="405",
                    content_handling=apigateway.ContentHandling.CONVERT_TO_TEXT,
                    response_parameters={"method.response.header.Allow": f"'{allowed}'"},
                    response_templates={
                        "application/json": method_not_allowed_template(resource.path, allowed)
                    },
                )
            ],
        )
        method = resource.add_method(
            "ANY",
            integration,
            authorization_type=apigateway.AuthorizationType.NONE,
            method_responses=[
                apigateway.MethodResponse(
                    status_code="405", response_parameters={"method.response.header.Allow": True}
                )
            ],
        )
        self._acknowledge_public(method, "Answers 405 with Allow from a MOCK; runs nothing")
        return method

    @staticmethod
    def _acknowledge_public(method: apigateway.Method, reason: str) -> None:
        """cdk-nag's finding on a method without authorisation, with the reason it is fine."""
        Validations.of(method).acknowledge(Acknowledgment(id="AwsSolutions-APIG4", reason=reason))
