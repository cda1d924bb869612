"""`make bench`'s AWS cost per million exchanges: the billing arithmetic on known numbers,
and the figure on a short conversation through the handler and the compactor.

No timing is asserted: only what the run counted and how it is priced.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import infra_cost, prices
from bench.infra_cost import (
    PerExchange,
    floor_units,
    gb_seconds,
    metric_series,
    metrics_at,
    priced,
    read_units_for,
)
from bench.write_units import item_size


def emf(dimensions: list[list[str]], names: list[str], **values: str) -> dict[str, Any]:
    """An EMF document as Powertools prints it."""
    return {
        "_aws": {
            "Timestamp": 0,
            "CloudWatchMetrics": [
                {
                    "Namespace": "ConversationMemory",
                    "Dimensions": dimensions,
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in names],
                }
            ],
        },
        **values,
        **{name: [1.0] for name in names},
    }


def test_reads_are_billed_per_started_4_kb_at_the_consistency_asked_for():
    assert read_units_for(0, consistent=True) == 1  # a read that finds nothing: one step
    assert read_units_for(4096, consistent=True) == 1
    assert read_units_for(4097, consistent=True) == 2
    assert read_units_for(4097, consistent=False) == 1  # eventually consistent: half
    assert read_units_for(100, consistent=False) == 0.5
    assert read_units_for(9000, consistent=True, transactional=True) == 6


def test_lambda_is_billed_by_the_started_millisecond_at_its_memory():
    assert gb_seconds(10.2, 1024) == pytest.approx(0.011)
    assert gb_seconds(10.0, 512) == pytest.approx(0.005)


def test_the_floor_is_one_transaction_of_three_items_per_call():
    assert floor_units([300, 350, 126]) == 6  # each under 1 KB: 2 units each
    assert floor_units([2500, 350, 126]) == 6 + 2 + 2
    counters = infra_cost.minimal_counters_item("TENANT#t#CONTACT#c")
    assert item_size(counters) < 1024


def test_a_tenant_dimension_counts_once_per_tenant():
    documents = [
        emf([["service"]], ["WindowTokens", "HistoryMessagesKept"], service="converse-history"),
        emf([["service"]], ["WindowTokens"], service="converse-history"),  # the same metric
        emf([["service"]], ["TurnsFolded"], service="compactor"),
        emf([["service"], ["service", "tenant"]], ["InputTokens"], service="h", tenant="acme"),
    ]
    series = metric_series(documents)
    assert len(series) == 5
    assert metrics_at(series, 1) == 5
    assert metrics_at(series, 1000) == 4 + 1000


def test_each_component_is_priced_from_the_price_table():
    use = PerExchange(
        wru=10,
        rru=8,
        gb_seconds=0.05,
        lambda_requests=2.5,
        api_requests=2,
        sqs_requests=0.75,
        log_bytes=1024**3 / 1_000_000,  # a GB a million exchanges
    )
    components = priced(use)
    assert components["dynamodb_writes"] == pytest.approx(10 * prices.DYNAMODB_USD_PER_MILLION_WRU)
    assert components["dynamodb_reads"] == pytest.approx(8 * prices.DYNAMODB_USD_PER_MILLION_RRU)
    assert components["lambda"] == pytest.approx(
        50_000 * prices.LAMBDA_USD_PER_GB_SECOND_ARM + 2.5 * prices.LAMBDA_USD_PER_MILLION_REQUESTS
    )
    assert components["api_gateway"] == pytest.approx(2 * prices.API_GATEWAY_HTTP_USD_PER_MILLION)
    assert components["sqs"] == pytest.approx(0.75 * prices.SQS_USD_PER_MILLION_REQUESTS)
    assert components["cloudwatch_logs"] == pytest.approx(
        prices.CLOUDWATCH_LOGS_USD_PER_GB_INGESTED
    )
    assert infra_cost.agentcore_usd_per_million() == pytest.approx(500)


def test_the_access_log_line_has_the_stages_fields_in_its_order():
    line = infra_cost.access_log_line(
        "POST /v1/tenants/{tenantId}/contacts/{contactId}/turns", 201, 812
    )
    logged = json.loads(line)
    assert list(logged) == [name for name, _ in infra_cost.access_log_fields()]
    assert logged["routeKey"] == "POST /v1/tenants/{tenantId}/contacts/{contactId}/turns"
    assert logged["httpMethod"] == "POST"
    assert (logged["status"], logged["responseLength"]) == ("201", "812")


def test_the_stacks_memory_sizes_are_read_from_infra():
    assert infra_cost.stack_memory_mb("converse") >= 128
    assert infra_cost.stack_memory_mb("compaction") >= 128
    assert infra_cost.compactor_service() == "compactor"


@pytest.fixture(scope="module")
def figure() -> dict[str, Any]:
    return infra_cost.run(exchanges=8)


def test_a_short_conversation_is_metered_and_priced(figure):
    assert figure["exchanges"] == 8
    components = figure["components_usd_per_million"]
    assert set(components) == set(infra_cost.COMPONENTS)
    assert all(value > 0 for value in components.values())
    assert figure["usd_per_million_exchanges"] == pytest.approx(sum(components.values()), abs=0.01)
    assert figure["vs_agentcore_memory"] == pytest.approx(
        500 / figure["usd_per_million_exchanges"], rel=0.01
    )
    assert components["api_gateway"] == 2 * prices.API_GATEWAY_HTTP_USD_PER_MILLION
    assert figure["usd_per_million_exchanges_over_rest_api"] == pytest.approx(
        figure["usd_per_million_exchanges"]
        + 2 * (prices.API_GATEWAY_REST_USD_PER_MILLION - prices.API_GATEWAY_HTTP_USD_PER_MILLION),
        abs=0.01,
    )
    assert figure["refused_write_requests"] == 0
    assert figure["prices"] == prices.as_json()


def test_the_converse_call_and_the_reply_are_one_transaction_each(figure):
    assert figure["round_trips_per_converse"] == 2
    assert figure["round_trips_median"]["reply"] == 1
    assert figure["rru_by_kind"]["reply"] == 0  # the reply reads nothing
    assert figure["items_read_per_converse"] > 0
    # Every call writes at least the floor's three items, at their sizes.
    assert figure["wru_per_exchange"] >= figure["wru_floor_per_exchange"] >= 12
    assert figure["floor_items_bytes"]["calls_floored"] == 2 * 8


def test_sqs_and_logs_are_counted_from_what_the_run_did(figure):
    sqs = figure["sqs"]
    assert sqs["send_message"] == sqs["receive_message"] == figure["compactions"]
    assert sqs["requests_per_exchange"] == pytest.approx(
        (sqs["send_message"] + sqs["receive_message"] + sqs["delete_message_batch"]) / 8, abs=1e-3
    )
    logs = figure["log_bytes_per_exchange"]
    assert logs["emf"] > 0  # the window's metrics, every converse call
    assert logs["total"] == pytest.approx(
        logs["emf"] + logs["log_lines"] + logs["lambda_platform"] + logs["api_access"], abs=0.5
    )
    metrics = figure["custom_metrics"]
    assert "WindowTokens" in metrics["shared"] + metrics["per_tenant"]
    assert figure["cloudwatch_usd_per_month_at_1000_tenants"] == pytest.approx(
        metrics["at_1000_tenants"] * prices.CLOUDWATCH_USD_PER_METRIC_MONTH
    )


def test_the_cost_is_plotted_beside_agentcore(figure, tmp_path):
    path = infra_cost.plot(figure, tmp_path / "plot.png")
    assert path.read_bytes().startswith(b"\x89PNG")
