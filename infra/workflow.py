"""One converse as a Step Functions workflow: history, decision, Bedrock, reply.

NameTheMessage -> RecordAndWindow (the history Lambda, direct invocation) -> Decision:
  refused  -> Refused -> Failed (the refusal's code and message as error and cause)
  escalate -> EventBridge `ConversationEscalated` (a person takes over)
  model    -> Bedrock Converse (SDK integration) -> NameTheReply
           -> RecordTheReply (the reply's first text block, with the model's token
              usage) -> Answered (or Refused)
A failing step retries what is transient and is caught into Failed with its error.

The execution's state holds at most 256 KiB, and going over cannot be caught, so
each step carries only what the next needs: the history Lambda's answer for the
workflow *is* the state (the incoming message is not carried beside the model's
input), and the model's reply replaces that input (docs/decisions.md).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.config import DeploymentConfig
from infra.log_retention import log_group
from infra.model_access import model_grant

EVENT_SOURCE = "conversation-memory"
ESCALATED = "ConversationEscalated"
# The Bedrock faults worth another try; the rest (ValidationException,
# AccessDeniedException, ResourceNotFoundException...) would fail again the same way.
TRANSIENT_MODEL_ERRORS = [
    "BedrockRuntime.ThrottlingException",
    "BedrockRuntime.ServiceUnavailableException",
    "BedrockRuntime.InternalServerException",
    "BedrockRuntime.ModelNotReadyException",
    "BedrockRuntime.ModelTimeoutException",
]
# The history Lambda answers every refusal (bad input, unknown tenant, cap) as a
# result, so an error from it is a fault (a timeout, a table still throttled after
# botocore's retries); every call is idempotent by its message id, so a retry is safe.
LAMBDA_FAULTS = ["States.TaskFailed"]
FAILURE = "$.failure"


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
        failed = sfn.Fail(
            self, "Failed", error_path=f"{FAILURE}.Error", cause_path=f"{FAILURE}.Cause"
        )
        # A refusal comes back as the Lambda's result ({"error": {"code", "message"},
        # "statusCode"}), not as a task failure: named here, it fails the execution
        # with its own code and message.
        refused = sfn.Pass(
            self,
            "Refused",
            parameters={
                "failure": {
                    "Error": sfn.JsonPath.string_at("$.error.code"),
                    "Cause": sfn.JsonPath.string_at("$.error.message"),
                }
            },
        ).next(failed)
        unexpected = sfn.Fail(
            self,
            "UnexpectedAnswer",
            error="UnexpectedAnswer",
            cause="The history Lambda's answer had neither a decision, a turn nor an error",
        )

        # The message's id is drawn once, before the task, for a message sent without
        # one: a retry after the commit (a timeout, say) replays it instead of storing
        # it again. The reply's id is drawn the same way below.
        name_the_message = self._draw_an_id("NameTheMessage", "$.messageName")
        converse = tasks.LambdaInvoke(
            self,
            "RecordAndWindow",
            lambda_function=history,
            payload=sfn.TaskInput.from_object(
                {
                    "action": "converse",
                    "for": "workflow",
                    "tenantId": sfn.JsonPath.string_at("$.tenantId"),
                    "contactId": sfn.JsonPath.string_at("$.contactId"),
                    "message": sfn.JsonPath.object_at("$.message"),
                    "defaultMessageId": sfn.JsonPath.string_at("$.messageName.id"),
                }
            ),
            payload_response_only=True,
            # The answer becomes the whole state: the message it came with stays behind.
            result_path="$",
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
                            "reason": sfn.JsonPath.string_at("$.reason"),
                            "turnCount": sfn.JsonPath.number_at("$.turnCount"),
                        }
                    ),
                )
            ],
            result_path=sfn.JsonPath.DISCARD,
        )
        # The model, or the profile and the models it routes to (infra/model_access.py).
        self.model_grant = model_grant(self, config.bedrock_model_id)
        model = tasks.CallAwsService(
            self,
            "AskTheModel",
            service="bedrockruntime",
            action="converse",
            iam_action="bedrock:InvokeModel",
            iam_resources=list(self.model_grant.resources),
            parameters={
                "ModelId": config.bedrock_model_id,
                "System": sfn.JsonPath.list_at("$.model.input.System"),
                "Messages": sfn.JsonPath.list_at("$.model.input.Messages"),
            },
            # The whole content: the history Lambda records its first text block, whatever
            # comes before it (a reasoning block), and refuses a reply with none, naming the
            # stop reason. A JSONPath filter here would fail uncatchably on a reply without
            # text. The usage goes whole too: its cache members are absent when no cache
            # was used, and a path to an absent member fails the state; the Lambda reads
            # the members it counts and records them with the reply.
            result_selector={
                "content": sfn.JsonPath.list_at("$.Output.Message.Content"),
                "stopReason": sfn.JsonPath.string_at("$.StopReason"),
                "usage": sfn.JsonPath.object_at("$.Usage"),
            },
            # The reply replaces the model's input, which no later step needs.
            result_path="$.model",
        )
        name_the_reply = self._draw_an_id("NameTheReply", "$.replyName")
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
                    "modelReply": sfn.JsonPath.object_at("$.model"),
                }
            ),
            payload_response_only=True,
            # The recorded turn is the execution's output.
            result_path="$",
            retry_on_service_exceptions=True,
        )
        for task in (converse, escalate, record):
            task.add_retry(
                errors=LAMBDA_FAULTS, interval=Duration.seconds(1), backoff_rate=2, max_attempts=3
            )
        model.add_retry(
            errors=TRANSIENT_MODEL_ERRORS,
            interval=Duration.seconds(2),
            backoff_rate=2,
            max_attempts=4,
            jitter_strategy=sfn.JitterType.FULL,
        )
        for step in (converse, escalate, model, record):
            step.add_catch(failed, result_path=FAILURE)

        answered = sfn.Succeed(self, "Answered")
        # Only a recorded turn is an answer, so a reply is never lost unseen.
        recorded = (
            sfn.Choice(self, "ReplyRecorded")
            .when(sfn.Condition.is_present("$.turn"), answered)
            .when(sfn.Condition.is_present("$.error"), refused)
            .otherwise(unexpected)
        )
        escalated = sfn.Succeed(self, "Escalated")
        decide = (
            sfn.Choice(self, "Decision")
            .when(sfn.Condition.is_present("$.error"), refused)
            .when(
                sfn.Condition.string_equals("$.decision", "escalate"),
                escalate.next(escalated),
            )
            .when(
                sfn.Condition.string_equals("$.decision", "model"),
                model.next(name_the_reply).next(record).next(recorded),
            )
            .otherwise(unexpected)
        )
        self.logs = log_group(self, "Logs", config)
        self.state_machine = sfn.StateMachine(
            self,
            "Converse",
            definition_body=sfn.DefinitionBody.from_chainable(
                name_the_message.next(converse).next(decide)
            ),
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.logs, level=sfn.LogLevel.ALL),
            timeout=Duration.minutes(5),
        )
        # The task grants what it names; a profile's models are granted beside it.
        for statement in self.model_grant.routed:
            self.state_machine.add_to_role_policy(statement)

    def _draw_an_id(self, state_name: str, result_path: str) -> sfn.Pass:
        """A Pass state that draws a UUID once, so the task after it retries under it."""
        return sfn.Pass(
            self, state_name, parameters={"id": sfn.JsonPath.uuid()}, result_path=result_path
        )
