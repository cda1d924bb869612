"""The compactor Lambda's entry point: SQS batches, partial failure, one fold per record.

A failing record (a summariser throttle, a poison message) is reported in
`batchItemFailures` and comes back; its neighbours are not failed with it.
After the queue's receive limit it lands in the dead-letter queue.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from adapters.compaction_queue import CompactionQueue
from adapters.conversation_store import ConversationKey, Fence
from adapters.dynamodb_store import DynamoDBConversationStore
from adapters.summariser import BedrockSummariser, OfflineSummariser, Summariser
from compactor.environment import CompactorEnvironment, load_compactor_environment
from compactor.service import Compaction, Compactor
from converse_history.erase import ErasureDeletion
from converse_history.telemetry import erasure_fields
from memory_core.rules import TENANT_ID_PATTERN
from memory_core.settings import load_settings

logger = Logger()
metrics = Metrics()
tracer = Tracer()

SETTINGS = load_settings()
ENVIRONMENT = load_compactor_environment()


class ErasureShare(BaseModel):
    """The rest of an erase, with its fence (adapters.compaction_queue.continue_erasure)."""

    model_config = ConfigDict(extra="ignore")

    erased_at: datetime = Field(alias="erasedAt")
    folds_below: int = Field(alias="foldsBelow", ge=0)


class CompactionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tenant_id: str = Field(alias="tenantId", pattern=TENANT_ID_PATTERN)
    contact_id: str = Field(alias="contactId", min_length=1, max_length=128)
    erase: ErasureShare | None = None


class QueueNotConfigured(Exception):
    """An erase's share did not finish, and this function has no queue to carry it on."""


class _RetryTheRecord:
    """Without its queue, the compactor leaves the rest of an erase to the record's
    next delivery: what was deleted stays deleted, and the next share goes on."""

    def continue_erasure(self, key: ConversationKey, fence: Fence) -> str:
        raise QueueNotConfigured(f"{key.partition}: the erase goes on at the next delivery")


class PowertoolsCompactorTelemetry:
    def folded(self, compaction: Compaction) -> None:
        assert compaction.summary is not None
        summary = compaction.summary
        logger.info(
            "memory_folded",
            extra={
                "turnsFolded": compaction.turns_folded,
                "summaryTokens": summary.output_tokens,
                "durationMs": round(compaction.seconds * 1000, 1),
            },
        )
        metrics.add_metric("TurnsFolded", MetricUnit.Count, compaction.turns_folded)
        metrics.add_metric("SummaryTokens", MetricUnit.Count, summary.output_tokens)
        metrics.add_metric("SummariserInputTokens", MetricUnit.Count, summary.input_tokens)
        metrics.add_metric("SummariserOutputTokens", MetricUnit.Count, summary.output_tokens)
        metrics.add_metric("FoldDuration", MetricUnit.Milliseconds, compaction.seconds * 1000)

    def lost_race(self) -> None:
        logger.info("memory_fold_lost_race")
        metrics.add_metric("FoldVersionConflicts", MetricUnit.Count, 1)

    def index_failed(self, key: ConversationKey, error: Exception) -> None:
        logger.exception("recall_index_failed", extra=key.log_fields())
        metrics.add_metric("RecallIndexFailures", MetricUnit.Count, 1)

    def erasure_continued(self, key: ConversationKey, items: int, *, complete: bool) -> None:
        logger.info(
            "contact_erasure_continued", extra=erasure_fields(key, items, complete=complete)
        )


def _summariser(environment: CompactorEnvironment) -> Summariser:
    if environment.summariser == "bedrock":
        assert environment.bedrock_model_id  # the environment's validator requires it
        return BedrockSummariser(boto3.client("bedrock-runtime"), environment.bedrock_model_id)
    return OfflineSummariser()


STORE = DynamoDBConversationStore(
    boto3.client("dynamodb"), ENVIRONMENT.table_name, SETTINGS.turn_retention_days
)
COMPACTOR = Compactor(
    store=STORE,
    summariser=_summariser(ENVIRONMENT),
    settings=SETTINGS,
    telemetry=PowertoolsCompactorTelemetry(),
    recall_index=STORE,
)
ERASURE = ErasureDeletion(
    store=STORE,
    queue=(
        CompactionQueue(lambda: boto3.client("sqs"), ENVIRONMENT.compaction_queue_url)
        if ENVIRONMENT.compaction_queue_url
        else _RetryTheRecord()
    ),
    telemetry=PowertoolsCompactorTelemetry(),
)
# Every failed record is reported, even when all of them failed: the event
# source mapping retries exactly those, and the failure count stays measurable.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@tracer.capture_method(capture_response=False)
def fold_one(record: SQSRecord) -> None:
    request = CompactionRequest.model_validate_json(record.body)
    key = ConversationKey(request.tenant_id, request.contact_id)
    if request.erase is not None:
        share = request.erase
        ERASURE.carry_on(key, Fence(share.erased_at, share.folds_below, state_erased=False))
        return
    # Every line logged while folding names the conversation, and a failure says whose.
    logger.append_keys(**key.log_fields())
    try:
        COMPACTOR.compact(key)
    except Exception as error:
        logger.warning("compaction_failed", extra={"error": type(error).__name__})
        raise
    finally:
        logger.remove_keys(list(key.log_fields()))


@logger.inject_lambda_context
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = process_partial_response(
        event=event, record_handler=fold_one, processor=processor, context=context
    )
    failed = len(response.get("batchItemFailures", []))
    if failed:
        logger.warning("compaction_records_failed", extra={"failed": failed})
    metrics.add_metric("CompactionRecordsFailed", MetricUnit.Count, failed)
    return dict(response)
