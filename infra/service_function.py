"""One way to build the service's Lambdas: python3.13 on arm64, the Powertools layer,
active tracing, a log group with retention, and a role of its own.

With `snap_start`, the function also gets Lambda SnapStart: each deploy that changes it
publishes a version, whose initialised environment Lambda snapshots, and the alias
`live` points at it. Callers invoke the alias: an unqualified call would run `$LATEST`,
which SnapStart never applies to. A new Powertools layer alone publishes no version:
its ARN is resolved at deploy time, so the version's hash does not see it, and the alias
takes it up with the next change to the code or the configuration.

The code asset is `functions/` as it is: every runtime dependency (Powertools,
pydantic, the X-Ray SDK) comes from the public Powertools layer and boto3 from
the runtime, so nothing is bundled and nothing needs Docker.
"""

from __future__ import annotations

from aws_cdk import Annotations, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import ROOT, DeploymentConfig
from infra.log_retention import log_group

METRICS_NAMESPACE = "ConversationMemory"
"""The functions' Powertools metrics namespace, which the alarms and the dashboard read."""
HISTORY_SERVICE = "converse-history"
COMPACTOR_SERVICE = "compactor"
"""The functions' `service` dimension (POWERTOOLS_SERVICE_NAME)."""

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
# Resolved by CloudFormation at deploy time from AWS's public parameter, not at synth.
POWERTOOLS_LAYER_PARAMETER = "/aws/service/powertools/python/arm64/python3.13/latest"
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "rules_cli.py"]
LIVE_ALIAS = "live"
"""The alias a SnapStart function's callers invoke: the version the last deploy published."""


def powertools_layer(scope: Construct) -> lambda_.ILayerVersion:
    arn = ssm.StringParameter.value_for_string_parameter(scope, POWERTOOLS_LAYER_PARAMETER)
    return lambda_.LayerVersion.from_layer_version_arn(scope, "PowertoolsLayer", arn)


class ServiceFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        handler: str,
        service_name: str,
        layer: lambda_.ILayerVersion,
        environment: dict[str, str],
        timeout: Duration,
        memory_mb: int = 512,
        snap_start: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = log_group(self, "Logs", config)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{service_name}: its own logs, and what its adapters call",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=lambda_.Code.from_asset(str(ROOT / "functions"), exclude=ASSET_EXCLUDES),
            handler=handler,
            layers=[layer],
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            timeout=timeout,
            memory_size=memory_mb,
            environment={
                "POWERTOOLS_SERVICE_NAME": service_name,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": "INFO",
                **config.settings_environment(),
                **environment,
            },
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snap_start else None,
            # A version holds a snapshot, billed (for Python) while the version exists, and
            # nothing calls a superseded one: the alias has moved on, so the next deploy
            # deletes it. The default, RETAIN, would keep every version ever published.
            current_version_options=(
                lambda_.VersionOptions(removal_policy=RemovalPolicy.DESTROY) if snap_start else None
            ),
        )
        self.alias: lambda_.Alias | None = None
        if snap_start:
            self.alias = lambda_.Alias(
                self, "Live", alias_name=LIVE_ALIAS, version=self.function.current_version
            )
            # CDK warns that SnapStart applies to published versions only: this one is.
            Annotations.of(self.function).acknowledge_warning(
                "@aws-cdk/aws-lambda:snapStartRequirePublish",
                "current_version publishes one on each change of the function; the alias runs it",
            )
