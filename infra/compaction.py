"""The compaction queue, its dead-letter queue, and the compactor Lambda it feeds.

The queue also carries the continuations of erasures too large for one call (SPEC 10).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from adapters.compaction_queue import DLQ_MAX_RECEIVES
from infra.config import DeploymentConfig
from infra.model_access import ModelGrant, model_grant
from infra.service_function import COMPACTOR_SERVICE, ServiceFunction

COMPACTOR_TIMEOUT = Duration.seconds(60)
# AWS's advice for an SQS event source: at least six times the function's timeout,
# so a batch still being retried by Lambda is not delivered a second time meanwhile.
VISIBILITY_TIMEOUT = Duration.seconds(6 * 60)
# Requests are per conversation and cheap to batch; a short window gathers a few
# without delaying a fold noticeably.
BATCH_SIZE = 10
BATCH_WINDOW = Duration.seconds(5)
# Bounds the summariser's concurrency (Bedrock quotas are per account and model).
MAX_CONCURRENCY = 5


class Compaction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        table: dynamodb.TableV2,
        layer: lambda_.ILayerVersion,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=VISIBILITY_TIMEOUT,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=DLQ_MAX_RECEIVES
            ),
        )
        environment = {
            "TABLE_NAME": table.table_name,
            "SUMMARISER": config.summariser,
            # The rest of a long erase is queued again on its own queue.
            "COMPACTION_QUEUE_URL": self.queue.queue_url,
        }
        if config.summariser == "bedrock":
            environment["BEDROCK_MODEL_ID"] = config.bedrock_model_id
        self.compactor = ServiceFunction(
            self,
            "Compactor",
            config=config,
            handler="compactor.handler.lambda_handler",
            service_name=COMPACTOR_SERVICE,
            layer=layer,
            environment=environment,
            timeout=COMPACTOR_TIMEOUT,
        )
        self.compactor.role.add_to_policy(
            iam.PolicyStatement(
                # BatchGetItem reads the late turns listed on the state. The fold's commit
                # is a transaction that updates the state and puts the fold's kept copy
                # (`FOLD#<version>`): TransactWriteItems needs the actions of its items.
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:UpdateItem",
                    "dynamodb:BatchGetItem",
                    "dynamodb:PutItem",
                ],
                resources=[table.table_arn],
            )
        )
        # An erase the converse Lambda could not finish continues here, from the queue
        # (SPEC 10): it deletes the contact's remaining items, and a continuation that
        # cannot finish either enqueues the next one.
        self.compactor.role.add_to_policy(
            iam.PolicyStatement(
                actions=["dynamodb:DeleteItem", "dynamodb:BatchWriteItem"],
                resources=[table.table_arn],
            )
        )
        self.compactor.role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
        )
        # The model, or the profile and the models it routes to (see infra/model_access.py).
        self.model_grant: ModelGrant | None = None
        if config.summariser == "bedrock":
            self.model_grant = model_grant(self, config.bedrock_model_id)
            for statement in self.model_grant.statements():
                self.compactor.role.add_to_policy(statement)
        self.compactor.function.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=BATCH_SIZE,
                max_batching_window=BATCH_WINDOW,
                max_concurrency=MAX_CONCURRENCY,
                report_batch_item_failures=True,
            )
        )
