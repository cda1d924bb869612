"""The tenants' rules in AWS AppConfig: a new deployment applies without a redeploy.

The configuration profile validates every deployment with the repo's JSON
Schema (bounded by the deployment's TURN_RETENTION_DAYS), so an invalid
document never reaches the history Lambda, which also keeps its last good
rules if one ever did.
"""

from __future__ import annotations

import json

from aws_cdk import Duration, Stack
from aws_cdk import aws_appconfig as appconfig
from constructs import Construct

from infra.config import DeploymentConfig
from memory_core.rules import SCHEMA_FILE, schema_with_retention


class RulesConfig(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        self.application = appconfig.Application(
            self, "Application", description="Conversation memory: tenant rules"
        )
        self.environment = appconfig.Environment(
            self, "Environment", application=self.application, environment_name=config.stage
        )
        schema = schema_with_retention(
            json.loads(SCHEMA_FILE.read_text(encoding="utf-8")),
            config.settings.turn_retention_days,
        )
        self.strategy = appconfig.DeploymentStrategy(
            self,
            "Strategy",
            rollout_strategy=appconfig.RolloutStrategy.linear(
                growth_factor=50,
                deployment_duration=Duration.minutes(2),
                final_bake_time=Duration.minutes(1),
            ),
            description="Rules roll out over two minutes, then bake for one",
        )
        self.profile = appconfig.HostedConfiguration(
            self,
            "Rules",
            application=self.application,
            name="rules",
            type=appconfig.ConfigurationType.FREEFORM,
            content=appconfig.ConfigurationContent.from_inline_json(
                json.dumps(config.rules_document)
            ),
            validators=[appconfig.JsonSchemaValidator.from_inline(json.dumps(schema))],
            deployment_strategy=self.strategy,
            deploy_to=[self.environment],
        )

    def profile_arn(self) -> str:
        """The rules profile in this environment: the only configuration the Lambda reads."""
        stack = Stack.of(self)
        return (
            f"arn:{stack.partition}:appconfig:{stack.region}:{stack.account}:"
            f"application/{self.application.application_id}/"
            f"environment/{self.environment.environment_id}/"
            f"configuration/{self.profile.configuration_profile_id}"
        )

    def lambda_environment(self) -> dict[str, str]:
        return {
            "RULES_SOURCE": "appconfig",
            "APPCONFIG_APPLICATION": self.application.application_id,
            "APPCONFIG_ENVIRONMENT": self.environment.environment_id,
            "APPCONFIG_PROFILE": self.profile.configuration_profile_id,
        }
