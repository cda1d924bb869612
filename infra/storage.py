"""The table: turns and conversation state, one table, keys prefixed by the tenant."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from adapters.dynamodb_store import TTL_ATTRIBUTE
from infra.config import DeploymentConfig


class Storage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.TableV2(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="PK", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="SK", type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),
            time_to_live_attribute=TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            # Counsel's record: production keeps it through a stack deletion.
            deletion_protection=config.production,
            removal_policy=config.removal_policy,
        )
