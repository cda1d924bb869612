"""The converse-history Lambda's entry point, and the wiring of its parts.

An event with an `action` is the Step Functions workflow invoking directly
(`direct_invocation`); any other is an API Gateway proxy request
(`proxy_event`, then the routes in `http_routes`). The settings and the
environment are validated at import, so a bad window or a missing table fails
the cold start with the reason instead of serving.

Nothing is built here that a converse call does not need (docs/performance.md):
the SQS client waits for the first compaction request, the OpenAPI document
for the first request for it, the workflow's protocol for the first direct
invocation, and there is no X-Ray recorder (Lambda's active tracing records
each invocation without one). Under SnapStart, what waited is loaded before
the snapshot instead, and what the snapshot froze is renewed after each
restore (`snapstart.py`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from adapters.compaction_queue import CompactionQueue
from adapters.dynamodb_store import DynamoDBConversationStore
from adapters.rules_source import AppConfigRulesSource, FileRulesSource, RulesSource
from converse_history import proxy_event
from converse_history.contacts import ContactsListing
from converse_history.environment import Environment, load_environment
from converse_history.erase import ContactErasure, ErasureDeletion
from converse_history.export import TurnsExport
from converse_history.http_routes import DataRoutes, build_resolver
from converse_history.preview import WindowPreview
from converse_history.recall_search import RecallSearch
from converse_history.service import ConverseService
from converse_history.snapstart import prepare_snapshot, register_renewal
from converse_history.telemetry import PowertoolsTelemetry
from memory_core.settings import Settings, load_settings

if TYPE_CHECKING:
    from converse_history.direct_invocation import DirectInvocation

logger = Logger()
metrics = Metrics()

SETTINGS = load_settings()
ENVIRONMENT = load_environment()
TELEMETRY = PowertoolsTelemetry(logger, metrics, tenant_metrics=SETTINGS.tenant_usage_metrics)


def _rules_source(environment: Environment, settings: Settings) -> RulesSource:
    if environment.rules_source == "appconfig":
        # The environment's validator guarantees all three names for this source.
        assert environment.appconfig_application
        assert environment.appconfig_environment
        assert environment.appconfig_profile
        source = AppConfigRulesSource(
            application=environment.appconfig_application,
            environment=environment.appconfig_environment,
            profile=environment.appconfig_profile,
            turn_retention_days=settings.turn_retention_days,
            on_rejected=TELEMETRY.rules_rejected,
            max_age_seconds=environment.rules_max_age_seconds,
        )
        source.current()  # unusable rules fail the cold start, not the first request
        return source
    return FileRulesSource(
        environment.rules_file, settings.turn_retention_days, on_rejected=TELEMETRY.rules_rejected
    )


DYNAMODB = boto3.client("dynamodb")
QUEUE = CompactionQueue(lambda: boto3.client("sqs"), ENVIRONMENT.compaction_queue_url)
RULES = _rules_source(ENVIRONMENT, SETTINGS)
STORE = DynamoDBConversationStore(DYNAMODB, ENVIRONMENT.table_name, SETTINGS.turn_retention_days)
SERVICE = ConverseService(
    store=STORE,
    queue=QUEUE,
    rules=RULES,
    settings=SETTINGS,
    telemetry=TELEMETRY,
)
DATA = DataRoutes(
    export=TurnsExport(store=STORE, rules=RULES),
    contacts=ContactsListing(store=STORE, rules=RULES),
    erasure=ContactErasure(
        store=STORE,
        rules=RULES,
        deletion=ErasureDeletion(store=STORE, queue=QUEUE, telemetry=TELEMETRY),
        telemetry=TELEMETRY,
    ),
    preview=WindowPreview(store=STORE, rules=RULES, settings=SETTINGS),
    recall=RecallSearch(store=STORE, rules=RULES, settings=SETTINGS),
)
APP = build_resolver(
    SERVICE, DATA, identity_required=ENVIRONMENT.caller_identity == "required", logger=logger
)


@functools.cache
def direct_invocation() -> DirectInvocation:
    """The workflow's protocol, loaded by the first direct invocation: no API call needs it."""
    from converse_history.direct_invocation import DirectInvocation  # noqa: PLC0415 (first use)

    return DirectInvocation(SERVICE, DATA, TELEMETRY)


DIRECT_ACTION = "action"
"""`direct_invocation.ACTION`, the key of a direct invocation; named here so that an API
call can be told from one without loading the protocol."""

prepare_snapshot(direct_invocation)  # a SnapStart snapshot holds everything loaded
register_renewal(
    connections=[DYNAMODB, QUEUE],
    caches=[RULES] if isinstance(RULES, AppConfigRulesSource) else [],
)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if DIRECT_ACTION in event:
        return direct_invocation().answer(event)
    return proxy_event.resolve(APP, event, context)
