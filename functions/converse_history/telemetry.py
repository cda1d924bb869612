"""Logs and metrics of the converse call, through Powertools.

Message bodies are never logged at INFO: turns are counted, measured and
named by id, and their text stays out of the logs.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from adapters.conversation_store import format_instant
from memory_core.repairs import Repair
from memory_core.turns import TurnPosition
from memory_core.usage import TokenUsage
from memory_core.window import Window

TENANT_DIMENSION = "tenant"
USAGE_METRICS = (
    "InputTokens",
    "CacheReadInputTokens",
    "CacheWriteInputTokens",
    "OutputTokens",
)
"""The model's token usage, per tenant: what the cached share is computed from."""


class PowertoolsTelemetry:
    def __init__(self, logger: Logger, metrics: Metrics) -> None:
        self._logger = logger
        self._metrics = metrics

    def window_bounded(self, window: Window) -> None:
        self._logger.info(
            "converse_history_window_bounded",
            extra={
                "dropped": window.dropped,
                "kept": window.kept,
                "estimatedTokens": window.estimated_tokens,
            },
        )

    def window_built(self, window: Window) -> None:
        self._metrics.add_metric("HistoryMessagesKept", MetricUnit.Count, window.kept)
        self._metrics.add_metric("HistoryMessagesDropped", MetricUnit.Count, window.dropped)
        self._metrics.add_metric("HistoryMessagesTrimmed", MetricUnit.Count, window.trimmed)
        self._metrics.add_metric("WindowTokens", MetricUnit.Count, window.estimated_tokens)

    def coverage_gap(self, missing: list[TurnPosition]) -> None:
        self._logger.warning(
            "converse_history_coverage_gap",
            extra={
                "missingTurns": len(missing),
                "oldestMissing": format_instant(min(t.sent_at for t in missing)),
                "newestMissing": format_instant(max(t.sent_at for t in missing)),
            },
        )
        self._metrics.add_metric("CoverageGaps", MetricUnit.Count, 1)

    def fragment_repaired(self, repairs: list[Repair]) -> None:
        # One line a repair, so that each one can be traced to its tool call.
        for repair in repairs:
            self._logger.warning(
                "converse_fragment_repaired",
                extra={
                    "repair": repair.kind,
                    "messageIndex": repair.message_index,
                    "toolUseId": repair.tool_use_id,
                },
            )
        self._metrics.add_metric("FragmentRepairs", MetricUnit.Count, len(repairs))

    def workflow_input_shortened(self, omitted_messages: int, memory_omitted: bool) -> None:
        self._logger.warning(
            "workflow_input_shortened",
            extra={"omittedMessages": omitted_messages, "memoryOmitted": memory_omitted},
        )
        self._metrics.add_metric("WorkflowInputsShortened", MetricUnit.Count, 1)

    def escalated(self, turn_count: int) -> None:
        self._logger.info("converse_escalated", extra={"turnCount": turn_count})
        self._metrics.add_metric("Escalations", MetricUnit.Count, 1)

    def compaction_enqueued(self) -> None:
        self._metrics.add_metric("CompactionsEnqueued", MetricUnit.Count, 1)

    def compaction_request_failed(self, error: Exception) -> None:
        self._logger.error("compaction_request_failed", extra={"error": type(error).__name__})
        self._metrics.add_metric("CompactionRequestsFailed", MetricUnit.Count, 1)

    def commit_retried(self, attempt: int) -> None:
        self._logger.debug("converse_commit_retried", extra={"attempt": attempt})
        self._metrics.add_metric("CommitRetries", MetricUnit.Count, 1)

    def replay_memory_missing(self, version: int) -> None:
        self._logger.warning("replay_memory_missing", extra={"memoryVersion": version})
        self._metrics.add_metric("ReplayMemoryMissing", MetricUnit.Count, 1)

    def rules_rejected(self, reason: str) -> None:
        self._logger.error("rules_rejected", extra={"reason": reason})
        self._metrics.add_metric("RulesRejected", MetricUnit.Count, 1)

    def reply_usage(self, tenant_id: str, usage: TokenUsage) -> None:
        """The model's tokens for a reply just recorded, under its tenant.

        The tenant is a dimension of these four only. The shared `Metrics` holds
        one dimension set for everything it flushes at the end of the invocation,
        so they go out at once in an EMF document of their own (`EphemeralMetrics`,
        which shares nothing with it), with the same namespace and `service`. A
        cache figure Bedrock left out counts 0, so the four always come together
        and the cached share is never computed over a missing one.
        """
        tenant_metrics = EphemeralMetrics(
            namespace=self._metrics.namespace, service=self._metrics.service
        )
        tenant_metrics.add_dimension(TENANT_DIMENSION, tenant_id)
        figures = (
            usage.input_tokens,
            usage.cache_read,
            usage.cache_write,
            usage.output_tokens,
        )
        for name, value in zip(USAGE_METRICS, figures, strict=True):
            tenant_metrics.add_metric(name, MetricUnit.Count, value)
        tenant_metrics.flush_metrics()

    def usage_unreadable(self, reason: str) -> None:
        """The model's reply came with a usage not in Bedrock's shape: recorded without it."""
        self._logger.warning("model_usage_unreadable", extra={"reason": reason})
