"""The REST API: the routes of SPEC 7, IAM on every route but health.

IAM authorisation tells the Lambda who called (`requestContext.identity`); the
Lambda maps that principal to the tenants it may act for, from the rules'
`callers` (SPEC 8), so a caller of tenant A asking for tenant B gets 403.

What API Gateway refuses itself, before the Lambda runs (a denied or unsigned
call, a body the validator rejects, throttling, a timeout), is answered in the
same `{"error": {"code", "message"}}` shape as the Lambda's refusals.
"""

from __future__ import annotations

import json

from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from converse_history.api_models import MAX_BLOCKS
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
    # API Gateway answers an unsigned call and an unknown method or path alike, with
    # "Missing Authentication Token": its message says both (GATEWAY_MESSAGES).
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
        "the request is not signed with SigV4, or no route matches its method and path"
    ),
}


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
        contact = (
            self.rest_api.root.add_resource("v1")
            .add_resource("tenants")
            .add_resource("{tenantId}")
            .add_resource("contacts")
            .add_resource("{contactId}")
        )
        self.converse_method = contact.add_resource("converse").add_method(
            "POST",
            integration,
            request_models={"application/json": converse_model},
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        self.turns_method = contact.add_resource("turns").add_method(
            "POST",
            integration,
            request_models={"application/json": turn_model},
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        self.memory_method = contact.add_resource("memory").add_method(
            "GET",
            integration,
            request_parameters=path_parameters,
            **iam_auth,  # type: ignore[arg-type]
        )
        self.health_method = self.rest_api.root.add_resource("health").add_method(
            "GET", integration, authorization_type=apigateway.AuthorizationType.NONE
        )
