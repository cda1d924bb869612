"""The table: turns and conversation state, one table, keys prefixed by the tenant.

Its one index lists a tenant's contacts (adapters/contacts_index.py).
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from adapters.contacts_index import (
    CONTACT_ID_ATTRIBUTE,
    CONTACTS_INDEX,
    CONTACTS_SHARD_ATTRIBUTE,
)
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
            # A tenant's contacts (SPEC 10), keys only: its keys are set on a state item
            # when the conversation starts, so the index holds nothing else.
            global_secondary_indexes=[
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=CONTACTS_INDEX,
                    partition_key=dynamodb.Attribute(
                        name=CONTACTS_SHARD_ATTRIBUTE, type=dynamodb.AttributeType.STRING
                    ),
                    sort_key=dynamodb.Attribute(
                        name=CONTACT_ID_ATTRIBUTE, type=dynamodb.AttributeType.STRING
                    ),
                    projection_type=dynamodb.ProjectionType.KEYS_ONLY,
                )
            ],
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryptionV2.aws_managed_key(),
            # Counsel's record: production keeps it through a stack deletion.
            deletion_protection=config.production,
            removal_policy=config.removal_policy,
        )
