"""The compaction queue, its dead-letter queue, and the compactor Lambda it feeds."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from adapters.compaction_queue import DLQ_MAX_RECEIVES
from infra.config import DeploymentConfig
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
        environment = {"TABLE_NAME": table.table_name, "SUMMARISER": config.summariser}
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
                # BatchGetItem reads the late turns listed on the state.
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:UpdateItem",
                    "dynamodb:BatchGetItem",
                ],
                resources=[table.table_arn],
            )
        )
        if config.summariser == "bedrock":
            self.compactor.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["bedrock:InvokeModel"],
                    resources=[foundation_model_arn(self, config.bedrock_model_id)],
                )
            )
        self.compactor.function.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=BATCH_SIZE,
                max_batching_window=BATCH_WINDOW,
                max_concurrency=MAX_CONCURRENCY,
                report_batch_item_failures=True,
            )
        )


def foundation_model_arn(scope: Construct, model_id: str) -> str:
    stack = Stack.of(scope)
    return f"arn:{stack.partition}:bedrock:{stack.region}::foundation-model/{model_id}"
