"""The one price table the cost figures use: AWS list prices, one Region, one date.

Every cost in `make bench` (`infra_cost`, `scale_day`) is computed from these
numbers and nothing else, so a price change is one edit here. On-demand list
prices in US East (N. Virginia), as published on the pages in `SOURCES`, read on
`AS_OF`; free tiers are left out (a production account outgrows them).
"""

from __future__ import annotations

from typing import Final

REGION: Final = "us-east-1"
AS_OF: Final = "2026-12-01"

DYNAMODB_USD_PER_MILLION_WRU: Final = 0.625
"""On-demand write request units (the price since November 2024's cut)."""
DYNAMODB_USD_PER_MILLION_RRU: Final = 0.125
"""On-demand read request units; a consistent read of up to 4 KB is one unit."""
DYNAMODB_USD_PER_GB_MONTH: Final = 0.25
"""Standard table class storage."""

LAMBDA_USD_PER_GB_SECOND_ARM: Final = 0.0000133334
"""Arm (Graviton) duration, the architecture the stack's functions run on."""
LAMBDA_USD_PER_MILLION_REQUESTS: Final = 0.20

API_GATEWAY_HTTP_USD_PER_MILLION: Final = 1.00
"""HTTP API requests, the first 300 million a month, each metered in 512 KB steps of its
size (the stack's front door: `infra/api.py`)."""
API_GATEWAY_REST_USD_PER_MILLION: Final = 3.50
"""REST API requests, the first 333 million a month (the front door before the HTTP API,
kept for `usd_per_million_exchanges_over_rest_api`)."""

SQS_USD_PER_MILLION_REQUESTS: Final = 0.40
"""Standard queues; every 64 KB chunk of a payload is a request."""

CLOUDWATCH_USD_PER_METRIC_MONTH: Final = 0.30
"""Custom metrics, the first 10,000: each distinct name and dimension values is one."""
CLOUDWATCH_LOGS_USD_PER_GB_INGESTED: Final = 0.50
"""Standard log class ingestion (embedded metric format lines are log lines)."""
CLOUDWATCH_LOGS_USD_PER_GB_MONTH: Final = 0.03
"""Log storage, after compression."""

AGENTCORE_MEMORY_USD_PER_THOUSAND_EVENTS: Final = 0.25
"""Amazon Bedrock AgentCore Memory, short-term memory: per event created."""
AGENTCORE_EVENTS_PER_EXCHANGE: Final = 2
"""The contact's message and the agent's reply, each an event."""

SOURCES: Final = (
    "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "https://aws.amazon.com/lambda/pricing/",
    "https://aws.amazon.com/api-gateway/pricing/",
    "https://aws.amazon.com/sqs/pricing/",
    "https://aws.amazon.com/cloudwatch/pricing/",
    "https://aws.amazon.com/bedrock/agentcore/pricing/",
)


def as_json() -> dict[str, object]:
    """The table as `bench/results.json` records it beside the figures it priced."""
    return {
        "region": REGION,
        "as_of": AS_OF,
        "dynamodb_usd_per_million_wru": DYNAMODB_USD_PER_MILLION_WRU,
        "dynamodb_usd_per_million_rru": DYNAMODB_USD_PER_MILLION_RRU,
        "dynamodb_usd_per_gb_month": DYNAMODB_USD_PER_GB_MONTH,
        "lambda_usd_per_gb_second_arm": LAMBDA_USD_PER_GB_SECOND_ARM,
        "lambda_usd_per_million_requests": LAMBDA_USD_PER_MILLION_REQUESTS,
        "api_gateway_http_usd_per_million": API_GATEWAY_HTTP_USD_PER_MILLION,
        "api_gateway_rest_usd_per_million": API_GATEWAY_REST_USD_PER_MILLION,
        "sqs_usd_per_million_requests": SQS_USD_PER_MILLION_REQUESTS,
        "cloudwatch_usd_per_metric_month": CLOUDWATCH_USD_PER_METRIC_MONTH,
        "cloudwatch_logs_usd_per_gb_ingested": CLOUDWATCH_LOGS_USD_PER_GB_INGESTED,
        "cloudwatch_logs_usd_per_gb_month": CLOUDWATCH_LOGS_USD_PER_GB_MONTH,
        "agentcore_memory_usd_per_thousand_events": AGENTCORE_MEMORY_USD_PER_THOUSAND_EVENTS,
        "agentcore_events_per_exchange": AGENTCORE_EVENTS_PER_EXCHANGE,
        "sources": list(SOURCES),
    }
