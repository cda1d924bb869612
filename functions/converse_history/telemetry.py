"""Logs and metrics of the converse call, through Powertools.

Message bodies are never logged: turns are counted, measured and named by
id, and their text stays out of the logs. Every line about one conversation
names its tenant and contact (`ConversationKey.log_fields`), so that an operator can
tell who is affected. The metrics carry no contact, and no tenant but those the
`TENANT_USAGE_METRICS` setting names: every value of a dimension is a custom
metric of its own, billed monthly, so what is counted per tenant is logged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from adapters.conversation_store import ConversationKey, format_instant
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
"""The model's token usage, over all tenants: what the cached share is computed from."""
REPLY_USAGE = "reply_usage"
"""The message of the log line that gives each recorded reply's usage and tenant."""


class PowertoolsTelemetry:
    def __init__(
        self, logger: Logger, metrics: Metrics, *, tenant_metrics: Iterable[str] = ()
    ) -> None:
        """`tenant_metrics`: the tenants whose usage metrics carry their name as well."""
        self._logger = logger
        self._metrics = metrics
        self._tenant_metrics = frozenset(tenant_metrics)

    def window_bounded(self, key: ConversationKey, window: Window) -> None:
        self._logger.info(
            "converse_history_window_bounded",
            extra={
                **key.log_fields(),
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

    def coverage_gap(self, key: ConversationKey, missing: list[TurnPosition]) -> None:
        self._logger.warning(
            "converse_history_coverage_gap",
            extra={
                **key.log_fields(),
                "missingTurns": len(missing),
                "oldestMissing": format_instant(min(t.sent_at for t in missing)),
                "newestMissing": format_instant(max(t.sent_at for t in missing)),
            },
        )
        self._metrics.add_metric("CoverageGaps", MetricUnit.Count, 1)

    def fragment_repaired(self, key: ConversationKey, repairs: list[Repair]) -> None:
        """The repairs first made in this window (`memory_core.repair_incidents`): one line
        each, so that each can be traced to its tool call, and one incident each."""
        for repair in repairs:
            self._logger.warning(
                "converse_fragment_repaired",
                extra={
                    **key.log_fields(),
                    "repair": repair.kind,
                    "messageIndex": repair.message_index,
                    "toolUseId": repair.tool_use_id,
                },
            )
        self._metrics.add_metric("FragmentRepairs", MetricUnit.Count, len(repairs))

    def workflow_input_shortened(
        self, key: ConversationKey, omitted_messages: int, memory_omitted: bool
    ) -> None:
        self._logger.warning(
            "workflow_input_shortened",
            extra={
                **key.log_fields(),
                "omittedMessages": omitted_messages,
                "memoryOmitted": memory_omitted,
            },
        )
        self._metrics.add_metric("WorkflowInputsShortened", MetricUnit.Count, 1)

    def escalated(self, key: ConversationKey, turn_count: int) -> None:
        self._logger.info("converse_escalated", extra={**key.log_fields(), "turnCount": turn_count})
        self._metrics.add_metric("Escalations", MetricUnit.Count, 1)

    def compaction_enqueued(self) -> None:
        self._metrics.add_metric("CompactionsEnqueued", MetricUnit.Count, 1)

    def compaction_request_failed(self, key: ConversationKey, error: Exception) -> None:
        self._logger.error(
            "compaction_request_failed",
            extra={**key.log_fields(), "error": type(error).__name__},
        )
        self._metrics.add_metric("CompactionRequestsFailed", MetricUnit.Count, 1)

    def commit_retried(self, attempt: int) -> None:
        self._logger.debug("converse_commit_retried", extra={"attempt": attempt})
        self._metrics.add_metric("CommitRetries", MetricUnit.Count, 1)

    def replay_memory_missing(self, key: ConversationKey, version: int) -> None:
        self._logger.warning(
            "replay_memory_missing", extra={**key.log_fields(), "memoryVersion": version}
        )
        self._metrics.add_metric("ReplayMemoryMissing", MetricUnit.Count, 1)

    def rules_rejected(self, reason: str) -> None:
        self._logger.error("rules_rejected", extra={"reason": reason})
        self._metrics.add_metric("RulesRejected", MetricUnit.Count, 1)

    def reply_usage(self, key: ConversationKey, usage: TokenUsage) -> None:
        """The model's tokens for a reply just recorded: logged under its tenant, counted.

        The log line says who used them, for a Logs Insights query to sum by tenant
        (README, the dashboard) at no cost per tenant. The four metrics have the
        dimension `service` only, so their count stays flat however many tenants come;
        a tenant named in `TENANT_USAGE_METRICS` has them under a second dimension set,
        `service` and `tenant`, in the same EMF document (one value, counted under
        both). The shared `Metrics` holds one dimension set for everything it flushes
        at the end of the invocation, so they go out at once in a document of their
        own (`EphemeralMetrics`, which shares nothing with it), with the same namespace
        and `service`. A cache figure Bedrock left out counts 0, so the four always
        come together and the cached share is never computed over a missing one.
        """
        # Bedrock's names, as the API takes them; in the order of USAGE_METRICS.
        counted = {
            "inputTokens": usage.input_tokens,
            "cacheReadInputTokens": usage.cache_read,
            "cacheWriteInputTokens": usage.cache_write,
            "outputTokens": usage.output_tokens,
        }
        self._logger.info(
            REPLY_USAGE,
            extra={"tenant": key.tenant_id, "contactDigest": contact_digest(key), **counted},
        )
        service = self._metrics.service
        usage_metrics = EphemeralMetrics(namespace=self._metrics.namespace, service=service)
        if key.tenant_id in self._tenant_metrics:
            named = {"service": service} if service else {}
            usage_metrics.add_dimensions(**named, **{TENANT_DIMENSION: key.tenant_id})
        for name, value in zip(USAGE_METRICS, counted.values(), strict=True):
            usage_metrics.add_metric(name, MetricUnit.Count, value)
        usage_metrics.flush_metrics()

    def usage_unreadable(self, key: ConversationKey, reason: str) -> None:
        """The model's reply came with a usage not in Bedrock's shape: recorded without it."""
        self._logger.warning("model_usage_unreadable", extra={**key.log_fields(), "reason": reason})

    def contact_erased(self, key: ConversationKey, items: int, *, complete: bool) -> None:
        self._logger.info("contact_erased", extra=erasure_fields(key, items, complete=complete))
        if items:
            self._metrics.add_metric("ContactsErased", MetricUnit.Count, 1)

    def erasure_continued(self, key: ConversationKey, items: int, *, complete: bool) -> None:
        self._logger.info(
            "contact_erasure_continued", extra=erasure_fields(key, items, complete=complete)
        )


def erasure_fields(key: ConversationKey, items: int, *, complete: bool) -> dict[str, object]:
    """What a log line about an erase says: the tenant, a digest of the contact (its id may
    be personal data: a phone number), and what was deleted; never what was said. The
    digest still lets an operator show which request was carried out."""
    return {
        "tenant": key.tenant_id,
        "contactDigest": contact_digest(key),
        "items": items,
        "complete": complete,
    }


def contact_digest(key: ConversationKey) -> str:
    """The contact, where its id (maybe personal data: a phone number) has no need to be."""
    return hashlib.sha256(f"{key.tenant_id}\x00{key.contact_id}".encode()).hexdigest()[:16]
