"""The REST API: the routes of SPEC 7, IAM on every route but health.

IAM authorisation tells the Lambda who called (`requestContext.identity`); the
Lambda maps that principal to the tenants it may act for, from the rules'
`callers` (SPEC 8), so a caller of tenant A asking for tenant B gets 403.
"""

from __future__ import annotations

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
