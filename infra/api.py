"""The HTTP API: the routes of SPEC 7 and 10, IAM on every route but health and `$default`.

An API Gateway HTTP API sends the converse-history Lambda payload format 2.0.
IAM authorisation (SigV4) tells the Lambda who called
(`requestContext.authorizer.iam`); the Lambda maps that principal to the
tenants it may act for, from the rules' `callers` (SPEC 8), so a caller of
tenant A asking for tenant B gets 403.

`GET` and `HEAD /health` are public: a probe that reads nothing. The
`$default` route is public too, and reaches the same Lambda: the gateway
prefers any route with a method to it, so it only sees what no route
matches. The Lambda answers those 404 (unknown path) or 405 with `Allow` (a
known path asked with another method), in the API's own
`{"error": {"code", "message"}}` shape, and reads no tenant data for them.
`GET /openapi.json` has no route either: it is served this way, unsigned.

What the gateway refuses itself, before the Lambda runs, keeps its own shape:
an HTTP API cannot customise it. An unsigned or denied call gets 403
`{"message":"Forbidden"}`, a throttled one 429 `{"message":"Too Many
Requests"}`, a body over 10 MB 413, and a Lambda it cannot reach or that
times out 500 or 503, each as `{"message": ...}`; the client maps those bodies.

Why an HTTP API: it costs $1.00 per million requests; the REST API's $3.50
was a third of what an exchange cost. The Lambda already validates every
body and path with pydantic, so the REST API's request validator added
nothing the service relies on. What it gives up: custom gateway error
bodies, X-Ray on the gateway (the Lambda keeps active tracing) and WAF.
"""

from __future__ import annotations

import json

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from infra.config import DeploymentConfig
from infra.log_retention import retention

ACCESS_LOG_FIELDS: tuple[tuple[str, str], ...] = (
    ("requestId", "$context.requestId"),
    ("ip", "$context.identity.sourceIp"),
    ("userArn", "$context.identity.userArn"),
    ("requestTime", "$context.requestTime"),
    ("httpMethod", "$context.httpMethod"),
    ("routeKey", "$context.routeKey"),
    ("status", "$context.status"),
    ("protocol", "$context.protocol"),
    ("responseLength", "$context.responseLength"),
    ("integrationError", "$context.integrationErrorMessage"),
)
"""One JSON line per request: who called which route, and how it was answered."""

STAGE_NAME = "$default"
"""The stage served at the API's root: the Lambda sees paths without a stage prefix."""

CONTACTS = "/v1/tenants/{tenantId}/contacts"
CONTACT = f"{CONTACTS}/{{contactId}}"

SIGNED_ROUTES: tuple[tuple[str, apigwv2.HttpMethod, str], ...] = (
    ("Converse", apigwv2.HttpMethod.POST, f"{CONTACT}/converse"),
    ("RecordTurn", apigwv2.HttpMethod.POST, f"{CONTACT}/turns"),
    # A conversation's data (SPEC 10): its export, the erase, the tenant's contacts.
    # `limit` and `cursor` pass to the Lambda as sent: it answers 400 naming the field.
    ("ExportTurns", apigwv2.HttpMethod.GET, f"{CONTACT}/turns"),
    ("Memory", apigwv2.HttpMethod.GET, f"{CONTACT}/memory"),
    # The next call's window, previewed (SPEC 13): a read, signed like the others.
    ("PreviewWindow", apigwv2.HttpMethod.GET, f"{CONTACT}/window"),
    # The exact words of older turns (SPEC 13): a read, signed like the others.
    ("RecallTurns", apigwv2.HttpMethod.POST, f"{CONTACT}/recall"),
    ("EraseContact", apigwv2.HttpMethod.DELETE, CONTACT),
    ("ListContacts", apigwv2.HttpMethod.GET, CONTACTS),
)
"""Construct id, method and path of each route a caller signs with SigV4."""

HEALTH_ROUTES: tuple[tuple[str, apigwv2.HttpMethod, str], ...] = (
    ("Health", apigwv2.HttpMethod.GET, "/health"),
    # Its own route: the gateway does not route a HEAD to a GET. The Lambda answers it
    # as the GET, without the body (load balancers, uptime checks).
    ("HealthHead", apigwv2.HttpMethod.HEAD, "/health"),
)


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
        # Not "Api", the REST API's id: CloudFormation cannot change the type of a
        # logical id in place, so the new API needs a name of its own.
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="Conversation memory: bounded, Converse-ready histories",
            # The one stage is declared below, with its throttle and access logs.
            create_default_stage=False,
            disable_execute_api_endpoint=False,
        )
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            http_api=self.http_api,
            stage_name=STAGE_NAME,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_rate_limit, burst_limit=config.api_burst_limit
            ),
            # Per-route metrics are billed as custom metrics (every route and metric one);
            # the stage's own Count, 4xx, 5xx and Latency are free and enough to alarm on.
            detailed_metrics_enabled=False,
        )
        # Set on the CloudFormation stage: the L2 takes its format as the REST API
        # module's AccessLogFormat, which this module no longer needs.
        cfn_stage = self.stage.node.default_child
        assert isinstance(cfn_stage, apigwv2.CfnStage)
        cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn,
            format=json.dumps(dict(ACCESS_LOG_FIELDS)),
        )
        self.url = self.stage.url
        # One integration for every route: one Lambda answers them all, payload 2.0.
        integration = HttpLambdaIntegration(
            "ConverseHistory",
            handler,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        self.routes: dict[str, apigwv2.HttpRoute] = {}
        iam = HttpIamAuthorizer()
        for route_id, method, path in SIGNED_ROUTES:
            self._add_route(route_id, apigwv2.HttpRouteKey.with_(path, method), integration, iam)
        for route_id, method, path in HEALTH_ROUTES:
            route = self._add_route(
                route_id, apigwv2.HttpRouteKey.with_(path, method), integration, None
            )
            self._acknowledge_public(route, "Health is a public probe; reads nothing")
        # What no route matches: the Lambda answers 404, or 405 with `Allow`.
        fallback = self._add_route("Unmatched", apigwv2.HttpRouteKey.DEFAULT, integration, None)
        self._acknowledge_public(
            fallback,
            "Unmatched requests only: the Lambda answers 404, 405 or its OpenAPI document, "
            "and reads no tenant data",
        )

    def _add_route(
        self,
        route_id: str,
        key: apigwv2.HttpRouteKey,
        integration: HttpLambdaIntegration,
        authorizer: HttpIamAuthorizer | None,
    ) -> apigwv2.HttpRoute:
        route = apigwv2.HttpRoute(
            self,
            route_id,
            http_api=self.http_api,
            route_key=key,
            integration=integration,
            authorizer=authorizer or apigwv2.HttpNoneAuthorizer(),
        )
        self.routes[key.key] = route
        return route

    @staticmethod
    def _acknowledge_public(route: apigwv2.HttpRoute, reason: str) -> None:
        """cdk-nag's finding on a route without authorisation, with the reason it is fine."""
        Validations.of(route).acknowledge(Acknowledgment(id="AwsSolutions-APIG4", reason=reason))
