"""The one stack users deploy with `cdk deploy`: one construct per concern."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Stack, Validations
from constructs import Construct

from infra.api import Api
from infra.compaction import Compaction
from infra.config import DeploymentConfig
from infra.converse import ConverseHistory
from infra.monitoring import Monitoring
from infra.rules_config import RulesConfig
from infra.service_function import powertools_layer
from infra.storage import Storage
from infra.workflow import Workflow


class ConversationMemoryStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        layer = powertools_layer(self)
        storage = Storage(self, "Storage", config=config)
        rules = RulesConfig(self, "Rules", config=config)
        compaction = Compaction(self, "Compaction", config=config, table=storage.table, layer=layer)
        converse = ConverseHistory(
            self,
            "Converse",
            config=config,
            table=storage.table,
            queue=compaction.queue,
            rules=rules,
            layer=layer,
        )
        # Both callers invoke the alias, so they reach the SnapStart version.
        api = Api(self, "Api", config=config, handler=converse.alias)
        workflow = Workflow(self, "Workflow", config=config, history=converse.alias)
        Monitoring(
            self,
            "Monitoring",
            config=config,
            # The function's metrics, not the alias's: they count every version and alias,
            # so a call that bypasses the alias still shows in the alarms.
            history=converse.function,
            history_logs=converse.service.log_group,
            compactor=compaction.compactor.function,
            dead_letters=compaction.dead_letters,
            api=api.stage,
            state_machine=workflow.state_machine,
        )
        self.storage, self.rules, self.compaction = storage, rules, compaction
        self.converse, self.api, self.workflow = converse, api, workflow
        CfnOutput(self, "ApiUrl", value=api.url)
        CfnOutput(self, "StateMachineArn", value=workflow.state_machine.state_machine_arn)
        CfnOutput(self, "TableName", value=storage.table.table_name)
        CfnOutput(self, "EventBusName", value=workflow.bus.event_bus_name)
        CfnOutput(self, "HistoryFunctionName", value=converse.function.function_name)
        # For agents invoking the Lambda directly: the alias runs the SnapStart version.
        CfnOutput(self, "HistoryAliasArn", value=converse.alias.function_arn)
        self._acknowledge_findings()

    def _acknowledge_findings(self) -> None:
        """The cdk-nag findings this design accepts, each with its one-line reason."""
        xray = "X-Ray's PutTraceSegments and PutTelemetryRecords take no resource but *"
        pinned = "Pinned to python3.13, the runtime this release is built and tested for"
        routed = "A profile routes to its model in any Region; granted only through the profile"
        acknowledgments = [
            (
                self.compaction.dead_letters,
                "AwsSolutions-SQS3",
                "This queue is the dead-letter queue",
            ),
            (self.compaction.compactor, "AwsSolutions-IAM5[Resource::*]", xray),
            # Only with an inference profile: its model in the Regions it routes to.
            *(
                (self.compaction.compactor, finding, routed)
                for finding in (
                    self.compaction.model_grant.nag_findings if self.compaction.model_grant else ()
                )
            ),
            *(
                (self.workflow, finding, routed)
                for finding in self.workflow.model_grant.nag_findings
            ),
            (self.converse.service, "AwsSolutions-IAM5[Resource::*]", xray),
            (
                self.workflow,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray and CloudWatch Logs' vended log delivery take no resource but *",
            ),
            (self.compaction.compactor, "AwsSolutions-L1", pinned),
            (self.converse.service, "AwsSolutions-L1", pinned),
        ]
        for construct, rule, reason in acknowledgments:
            Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))
