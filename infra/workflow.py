"""One converse as a Step Functions workflow: history, decision, Bedrock, reply.

History Lambda (direct invocation) -> Choice on `decision`:
  escalate -> EventBridge `ConversationEscalated` (a person takes over)
  model    -> Bedrock Converse (SDK integration, the returned fragment)
           -> record the reply through the Lambda
Each task retries transient faults and catches the rest into a Fail state.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.compaction import foundation_model_arn
from infra.config import DeploymentConfig
from infra.log_retention import log_group

EVENT_SOURCE = "conversation-memory"
ESCALATED = "ConversationEscalated"


class Workflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        history: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(self, "Bus", description="Conversation memory events")
        failed = sfn.Fail(self, "Failed", cause="A step of the converse failed")

        converse = tasks.LambdaInvoke(
            self,
            "RecordAndWindow",
            lambda_function=history,
            payload=sfn.TaskInput.from_object(
                {
                    "action": "converse",
                    "tenantId": sfn.JsonPath.string_at("$.tenantId"),
                    "contactId": sfn.JsonPath.string_at("$.contactId"),
                    "message": sfn.JsonPath.object_at("$.message"),
                }
            ),
            payload_response_only=True,
            result_path="$.history",
            retry_on_service_exceptions=True,
        )
        escalate = tasks.EventBridgePutEvents(
            self,
            "PublishEscalation",
            entries=[
                tasks.EventBridgePutEventsEntry(
                    event_bus=self.bus,
                    source=EVENT_SOURCE,
                    detail_type=ESCALATED,
                    detail=sfn.TaskInput.from_object(
                        {
                            "tenantId": sfn.JsonPath.string_at("$.tenantId"),
                            "contactId": sfn.JsonPath.string_at("$.contactId"),
                            "reason": sfn.JsonPath.string_at("$.history.reason"),
                            "turnCount": sfn.JsonPath.number_at("$.history.turnCount"),
                        }
                    ),
                )
            ],
            result_path=sfn.JsonPath.DISCARD,
        )
        model = tasks.CallAwsService(
            self,
            "AskTheModel",
            service="bedrockruntime",
            action="converse",
            iam_action="bedrock:InvokeModel",
            iam_resources=[foundation_model_arn(self, config.bedrock_model_id)],
            parameters={
                "ModelId": config.bedrock_model_id,
                "System": sfn.JsonPath.list_at("$.history.converseForStepFunctions.System"),
                "Messages": sfn.JsonPath.list_at("$.history.converseForStepFunctions.Messages"),
            },
            result_selector={"text": sfn.JsonPath.string_at("$.Output.Message.Content[0].Text")},
            result_path="$.model",
        )
        # The reply's id is drawn once, before the task: a retried record (a timeout after
        # the commit, say) then carries the same id and is stored once.
        name_the_reply = sfn.Pass(
            self,
            "NameTheReply",
            parameters={"id": sfn.JsonPath.uuid()},
            result_path="$.replyName",
        )
        record = tasks.LambdaInvoke(
            self,
            "RecordTheReply",
            lambda_function=history,
            payload=sfn.TaskInput.from_object(
                {
                    "action": "record",
                    "tenantId": sfn.JsonPath.string_at("$.tenantId"),
                    "contactId": sfn.JsonPath.string_at("$.contactId"),
                    "id": sfn.JsonPath.string_at("$.replyName.id"),
                    "role": "assistant",
                    "text": sfn.JsonPath.string_at("$.model.text"),
                }
            ),
            payload_response_only=True,
            result_path="$.reply",
            retry_on_service_exceptions=True,
        )
        for task in (converse, escalate, model, record):
            task.add_retry(
                errors=["States.TaskFailed", "ThrottlingException"],
                interval=Duration.seconds(1),
                backoff_rate=2,
                max_attempts=3,
            )
            task.add_catch(failed, result_path="$.error")

        answered = sfn.Succeed(self, "Answered")
        # A refusal from the function comes back as a result ({"error", "statusCode"}), not a
        # task failure: only a recorded turn is an answer, so the reply is never lost unseen.
        recorded = (
            sfn.Choice(self, "ReplyRecorded")
            .when(sfn.Condition.is_present("$.reply.turn"), answered)
            .otherwise(failed)
        )
        escalated = sfn.Succeed(self, "Escalated")
        decide = (
            sfn.Choice(self, "Decision")
            .when(
                sfn.Condition.string_equals("$.history.decision", "escalate"),
                escalate.next(escalated),
            )
            .when(
                sfn.Condition.string_equals("$.history.decision", "model"),
                model.next(name_the_reply).next(record).next(recorded),
            )
            .otherwise(failed)
        )
        self.logs = log_group(self, "Logs", config)
        self.state_machine = sfn.StateMachine(
            self,
            "Converse",
            definition_body=sfn.DefinitionBody.from_chainable(converse.next(decide)),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.logs, level=sfn.LogLevel.ALL),
            timeout=Duration.minutes(5),
        )
