"""The converse-history Lambda: its settings, its table and queue rights, its rules.

Besides conversing it exports a contact's turns, lists a tenant's contacts (a
Query on the contacts index) and erases a contact (SPEC 10).

It is on the latency path of every API call and every workflow execution, so it runs
with SnapStart, and both callers invoke its alias `live` (see infra/service_function.py).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from adapters.contacts_index import CONTACTS_INDEX
from infra.config import DeploymentConfig
from infra.rules_config import RulesConfig
from infra.service_function import HISTORY_SERVICE, ServiceFunction


class ConverseHistory(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        table: dynamodb.TableV2,
        queue: sqs.Queue,
        rules: RulesConfig,
        layer: lambda_.ILayerVersion,
    ) -> None:
        super().__init__(scope, construct_id)
        self.service = ServiceFunction(
            self,
            "History",
            config=config,
            handler="converse_history.handler.lambda_handler",
            service_name=HISTORY_SERVICE,
            layer=layer,
            environment={
                "TABLE_NAME": table.table_name,
                "COMPACTION_QUEUE_URL": queue.queue_url,
                "CALLER_IDENTITY": "required",
                "RULES_MAX_AGE_SECONDS": "45",
                **rules.lambda_environment(),
            },
            timeout=Duration.seconds(10),
            snap_start=True,
        )
        # The function, for its metrics (every version's and alias's invocations); the alias,
        # for whatever invokes it (the API, the workflow, an agent calling it directly).
        self.function = self.service.function
        alias = self.service.alias
        assert alias is not None  # snap_start publishes a version behind an alias
        self.alias: lambda_.Alias = alias
        role = self.service.role
        # TransactWriteItems needs the actions of the items it writes.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:ConditionCheckItem",
                ],
                resources=[table.table_arn],
            )
        )
        # The data routes (SPEC 10): an export reads the turns an answer lists in batches;
        # an erase deletes the contact's items, one by one and in batches.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:BatchGetItem",
                    "dynamodb:DeleteItem",
                    "dynamodb:BatchWriteItem",
                ],
                resources=[table.table_arn],
            )
        )
        # Listing a tenant's contacts: the index only, keys only.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=[f"{table.table_arn}/index/{CONTACTS_INDEX}"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[queue.queue_arn])
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["appconfig:StartConfigurationSession", "appconfig:GetLatestConfiguration"],
                resources=[rules.profile_arn()],
            )
        )
