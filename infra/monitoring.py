"""Alarms on what loses or hides conversation, and a dashboard of the memory's figures."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from converse_history.telemetry import REPLY_USAGE, TENANT_DIMENSION
from infra.config import DeploymentConfig
from infra.service_function import COMPACTOR_SERVICE, HISTORY_SERVICE, METRICS_NAMESPACE

NAMESPACE = METRICS_NAMESPACE

TENANT_USAGE_QUERY = (
    f'filter message = "{REPLY_USAGE}"',
    "stats count(*) as replies, sum(inputTokens) as input, "
    "sum(cacheReadInputTokens) as cacheRead, sum(cacheWriteInputTokens) as cacheWrite, "
    "sum(outputTokens) as output by tenant",
    "sort input desc",
)
"""The model's tokens per tenant, summed from the history Lambda's `reply_usage` lines
(Logs Insights joins the lines with `\n| `; the README shows the same query)."""


def usage_metric(name: str, label: str) -> cloudwatch.Metric:
    """A token usage metric of the history Lambda, all tenants: its `service` series."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={"service": HISTORY_SERVICE},
        statistic="Sum",
        label=label,
        period=Duration.minutes(5),
    )


def named_tenants(name: str, label: str) -> cloudwatch.MathExpression:
    """A usage metric of each tenant `TENANT_USAGE_METRICS` names, one line each.

    A search expression: it finds the series with the `tenant` dimension beside
    `service`, which exist for the named tenants only, so the stack lists none.
    """
    schema = f"{{{NAMESPACE},service,{TENANT_DIMENSION}}}"
    search = f'{schema} MetricName="{name}" service="{HISTORY_SERVICE}"'
    return cloudwatch.MathExpression(
        expression=f"SEARCH('{search}', 'Sum', 300)",
        using_metrics={},
        label=f"${{PROP('Dim.{TENANT_DIMENSION}')}}: {label}",
        period=Duration.minutes(5),
    )


def cached_share() -> cloudwatch.MathExpression:
    """The share of the prompt tokens Bedrock read from its cache, in percent, all tenants.

    Bedrock counts its cache apart: `inputTokens` are the prompt tokens processed in
    full, beside those read from the cache and those written to it.
    """
    return cloudwatch.MathExpression(
        expression="100 * cacheRead / (input + cacheRead + cacheWrite)",
        using_metrics={
            "input": usage_metric("InputTokens", "Input tokens"),
            "cacheRead": usage_metric("CacheReadInputTokens", "Cache read tokens"),
            "cacheWrite": usage_metric("CacheWriteInputTokens", "Cache write tokens"),
        },
        label="Prompt tokens read from the cache (%)",
        period=Duration.minutes(5),
    )


def service_metric(name: str, service: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """A Powertools metric: the namespace, and the `service` dimension it adds."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=Duration.minutes(5),
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: DeploymentConfig,
        # The functions themselves: their metrics (dimension FunctionName) add up every
        # version and alias, so the history's alarms outlive each deploy's new version.
        history: lambda_.IFunction,
        history_logs: logs.ILogGroup,
        compactor: lambda_.IFunction,
        dead_letters: sqs.IQueue,
        # The HTTP API's stage: its figures carry ApiId and Stage, this deployment's own.
        api: apigwv2.IHttpStage,
        state_machine: sfn.IStateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        five_minutes = Duration.minutes(5)

        def alarm(
            name: str,
            description: str,
            metric: cloudwatch.IMetric,
            threshold: float = 0,
            periods: int = 1,
        ) -> cloudwatch.Alarm:
            return cloudwatch.Alarm(
                self,
                name,
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=periods,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        self.alarms = [
            alarm(
                "DeadLettersWaiting",
                "A compaction request failed every retry: its turns are unfolded",
                dead_letters.metric_approximate_number_of_messages_visible(
                    period=five_minutes, statistic="Maximum"
                ),
            ),
            alarm(
                "CompactorErrors",
                "The compactor Lambda failed",
                compactor.metric_errors(period=five_minutes),
            ),
            alarm(
                "ConverseErrors",
                "The converse-history Lambda failed (crashed or timed out)",
                history.metric_errors(period=five_minutes),
            ),
            # A fault the Lambda catches is answered 500 and counts as no Lambda error,
            # nor do the gateway's own 5xx (a timeout, an integration failure).
            alarm(
                "ApiServerErrors",
                "The API answered a 5xx: a route failed, or the gateway could not reach it",
                api.metric_server_error(period=five_minutes, statistic="Sum"),
            ),
            alarm(
                "WorkflowFailed",
                "A converse workflow execution failed: the contact got no answer",
                state_machine.metric_failed(period=five_minutes, statistic="Sum"),
            ),
            alarm(
                "WorkflowTimedOut",
                "A converse workflow execution timed out: the contact got no answer",
                state_machine.metric_timed_out(period=five_minutes, statistic="Sum"),
            ),
            alarm(
                "CoverageGaps",
                "Turns held by neither the fold nor the window: context lost",
                service_metric("CoverageGaps", HISTORY_SERVICE),
            ),
            # Duration is the handler's time: it leaves out SnapStart's Restore Duration,
            # as it left out Init Duration before; the API's own latency includes both.
            alarm(
                "ConverseLatency",
                "The converse call's p99 duration is over its budget",
                history.metric_duration(period=five_minutes, statistic="p99"),
                threshold=config.converse_p99_alarm_ms,
                periods=3,
            ),
        ]

        def history_metric(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
            return service_metric(name, HISTORY_SERVICE, statistic)

        def compactor_metric(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
            return service_metric(name, COMPACTOR_SERVICE, statistic)

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="History window: messages",
                left=[
                    history_metric("HistoryMessagesKept"),
                    history_metric("HistoryMessagesDropped"),
                    history_metric("HistoryMessagesTrimmed"),
                ],
                # Tool calls the agent left unanswered, results answering nothing.
                right=[history_metric("FragmentRepairs")],
            ),
            cloudwatch.GraphWidget(
                title="History window: tokens",
                left=[
                    history_metric("WindowTokens", "Average"),
                    history_metric("WindowTokens", "p99"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Escalations, compactions, coverage gaps",
                left=[
                    history_metric("Escalations"),
                    history_metric("CompactionsEnqueued"),
                    history_metric("CoverageGaps"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Fold",
                left=[compactor_metric("TurnsFolded"), compactor_metric("FoldVersionConflicts")],
                right=[compactor_metric("FoldDuration", "p99")],
            ),
            cloudwatch.GraphWidget(
                title="Summariser tokens",
                left=[
                    compactor_metric("SummariserInputTokens"),
                    compactor_metric("SummariserOutputTokens"),
                    compactor_metric("SummaryTokens", "Average"),
                ],
            ),
            cloudwatch.GraphWidget(
                title="Latency and errors",
                left=[
                    history.metric_duration(statistic="p99"),
                    history.metric_duration(statistic="p50"),
                ],
                right=[history.metric_errors(), compactor.metric_errors()],
            ),
            cloudwatch.GraphWidget(
                title="API responses",
                left=[
                    api.metric_client_error(statistic="Sum"),
                    api.metric_server_error(statistic="Sum"),
                ],
                right=[api.metric_count(statistic="Sum")],
            ),
            cloudwatch.GraphWidget(
                title="Converse workflow executions",
                left=[
                    state_machine.metric_started(),
                    state_machine.metric_succeeded(),
                    state_machine.metric_failed(),
                    state_machine.metric_timed_out(),
                ],
                # Model inputs that left their oldest messages out to fit the state.
                right=[history_metric("WorkflowInputsShortened")],
            ),
            cloudwatch.GraphWidget(
                title="Model tokens: cached share of the prompt, all tenants",
                left=[cached_share()],
                left_y_axis=cloudwatch.YAxisProps(min=0, max=100, label="%", show_units=False),
                # The replies' usage as the model reported it, over every tenant.
                right=[
                    usage_metric("InputTokens", "Input tokens"),
                    usage_metric("CacheReadInputTokens", "Cache read tokens"),
                    usage_metric("CacheWriteInputTokens", "Cache write tokens"),
                    usage_metric("OutputTokens", "Output tokens"),
                ],
            ),
            # Per tenant from the log: a metric per tenant would cost $0.30 a month each.
            cloudwatch.LogQueryWidget(
                title="Model tokens by tenant (Logs Insights, reply_usage lines)",
                log_group_names=[history_logs.log_group_name],
                query_lines=list(TENANT_USAGE_QUERY),
                view=cloudwatch.LogQueryVisualizationType.TABLE,
                width=24,
            ),
        )
        if config.settings.tenant_usage_metrics:
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title="Model tokens of the tenants named in TENANT_USAGE_METRICS",
                    left=[
                        named_tenants("InputTokens", "input"),
                        named_tenants("CacheReadInputTokens", "cache read"),
                        named_tenants("CacheWriteInputTokens", "cache write"),
                    ],
                    right=[named_tenants("OutputTokens", "output")],
                )
            )
