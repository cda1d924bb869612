"""`make bench`'s figures, each run tiny, so the benchmark code cannot rot unnoticed.

No timing is asserted (the machines that run the tests are noisy): only the
shape of each figure and the behaviour it measures that is not a timing.
"""

from __future__ import annotations

import json
from typing import Any

from bench import (
    __main__ as bench_main,
)
from bench import (
    cold_import,
    coverage,
    dynamodb_reads,
    emulation,
    fold,
    local_e2e,
    local_runner,
    prompt_cost,
    prompt_tokens,
    recall,
    window_vs_langchain,
)
from bench.dynamodb_reads import UNFOLDED_TURNS
from memory_core.settings import load_settings

SETTINGS = load_settings({})


def positive_number(value):
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def test_the_window_is_measured_against_trim_messages_on_both_sizes():
    figures = window_vs_langchain.run(sizes=(6, 40), conversations=2, rounds=3)
    for size in (6, 40):
        assert positive_number(figures[f"ratio_{size}"])
        assert positive_number(figures[f"ours_us_{size}"])
        assert positive_number(figures[f"theirs_us_{size}"])
        assert figures[f"samples_per_side_{size}"] == 2 * 3
        assert all(
            0 < kept <= SETTINGS.history_window_max_messages
            for kept in figures[f"kept_ours_{size}"]
        )
        assert all(0 <= kept <= size for kept in figures[f"kept_theirs_{size}"])
    rows = window_vs_langchain.profile(size=20, calls=10, top=3)
    assert len(rows) == 3
    assert {"function", "calls_per_build", "own_share_pct"} <= set(rows[0])


def test_a_converse_call_reads_one_page_whatever_the_length_in_two_round_trips():
    figures = dynamodb_reads.run(small=4, large=60, session_exchanges=2)
    reads = figures["items_read_per_converse"]
    assert reads["at_4"] == 4 + 1  # the state and every turn
    # One page: the state, the memory's place, the cap and one more turn.
    assert reads["at_60"] == SETTINGS.history_window_max_messages + 3
    assert reads["queries_at_60"] == 1
    assert figures["dynamodb_round_trips_per_converse"] == 2
    assert figures["dynamodb_round_trips"]["operations"] == ["Query", "TransactWriteItems"]
    assert figures["dynamodb_round_trips"]["session_max"] <= 2


def test_the_cold_start_is_timed_in_fresh_interpreters_with_a_first_call():
    figures = cold_import.run(runs=1)
    for name in ("handler_ms", "boto3_ms", "ratio_vs_boto3", "first_call_ms", "second_call_ms"):
        assert positive_number(figures[name]), name
    assert figures["ratio_with_first_call_vs_boto3"] >= figures["ratio_vs_boto3"]
    assert figures["first_call_extra_ms"] >= 0
    assert len(figures["handler_samples_ms"]) == len(figures["boto3_samples_ms"]) == 1
    stages = cold_import.profile(runs=1)
    assert "import boto3" in stages
    # Timed if it ran: the OpenAPI document is built on its first request, not at import.
    assert "handler module: OpenAPI document" not in stages
    assert all(isinstance(ms, float) for ms in stages.values())
    assert positive_number(cold_import.project_compile_ms(runs=1))


def test_the_bounded_prompt_is_tallied_and_plotted(tmp_path):
    figures = prompt_tokens.run(pairs=20)
    assert figures["turns"] == 40
    assert positive_number(figures["bounded_at_turn_40"])
    assert figures["unbounded_at_turn_40"] >= figures["bounded_at_turn_40"] - 800
    assert len(figures["series"]["turn"]) == len(figures["series"]["bounded"]) == 20
    path = prompt_tokens.plot(figures, tmp_path / "plot.png")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_the_prompts_cost_is_priced_side_by_side_and_plotted(tmp_path):
    figures = prompt_cost.run(pairs=12)
    assert (figures["turns"], figures["agent_prompt_tokens"]) == (24, 1500)
    for model in ("claude", "nova"):
        for pattern in ("active", "idle"):
            side_by_side = figures[model][pattern]
            for policy in prompt_cost.POLICIES:
                assert positive_number(side_by_side[policy]["cost_per_converse"]), policy
                assert 0 <= side_by_side[policy]["cached_read_share"] <= 1
            assert positive_number(side_by_side["saving_vs_sliding"])
            assert positive_number(side_by_side["saving_vs_trim_messages"])
            # Past the cache's five minutes, nothing is ever read.
            if pattern == "idle":
                assert side_by_side["stable"]["cached_read_share"] == 0
    series = figures["series"]
    assert (series["model"], series["pattern"]) == ("claude", "active")
    assert all(len(series[name]) == 12 for name in ("turn", *prompt_cost.POLICIES))
    assert prompt_cost.run(pairs=12) == figures  # seeded: the same again
    path = prompt_cost.plot(figures, tmp_path / "plot.png")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_coverage_counts_gaps_within_and_beyond_the_bound():
    figures = coverage.run(pairs=60, lags=(0, 80))
    assert figures["gaps_within_bound"] == 0
    assert figures["gaps_beyond_bound"] > 0
    assert figures["bound_turns"] in (0, None)
    assert [row["lag_turns"] for row in figures["per_lag"]] == [0, 80]
    assert figures["calls_within_bound"] + figures["calls_beyond_bound"] == 2 * 60


def test_one_compaction_folds_the_same_ten_turns_early_and_late():
    figures = fold.run(early=20, late=60)
    assert figures["turns_folded_per_compaction"] == 2 * fold.UNFOLDED_PAIRS
    assert positive_number(figures["summariser_input_growth_20_to_60_turns"])
    assert figures["summariser_input_tokens_at_60"] < figures["whole_transcript_tokens_at_60"]


def test_recall_is_timed_through_the_handler_on_an_indexed_conversation():
    figures = recall.run(turns=300, recalls=3)
    assert figures["folds"] == -(-(300 - UNFOLDED_TURNS) // recall.TURNS_PER_FOLD)
    assert positive_number(figures["p50_ms_at_300_turns"])
    assert figures["recalls_with_a_passage"] == 3
    assert 0 < figures["index_items_read_per_recall"] < figures["index_items_stored"]
    assert positive_number(figures["scan_and_rank_ms_without_index"])


def test_the_local_runner_is_driven_over_http_and_stopped():
    figures = local_e2e.run(calls=3, contacts=2)
    assert figures["calls"] == 3
    assert positive_number(figures["p50_ms"])
    assert figures["p99_ms"] >= figures["p50_ms"]
    assert figures["exit_code"] == 0  # stopped by SIGTERM, cleanly


def test_one_local_runner_holds_a_session_and_answers_a_whole_burst():
    figures = local_runner.run(exchanges=6, early=3, window=3, parallel_calls=4)
    assert figures["exchanges"] == 6
    for name in ("rss_mb_at_3", "rss_mb_at_6", "rss_growth", "p50_ms_at_3", "p50_ms_at_6"):
        assert positive_number(figures[name]), name
    assert figures["p99_ms_at_6"] >= figures["p50_ms_at_6"]
    assert figures["parallel_calls"] == 4
    assert figures["parallel_answered"] == 4  # no connection reset, no error
    assert figures["parallel_outcomes"] == {"200": 4}
    assert figures["exit_code"] == 0  # stopped by SIGTERM, cleanly


def test_the_results_file_names_the_machine_and_the_targets(tmp_path, capsys):
    output = tmp_path / "results.json"
    assert bench_main.main(["--only", "fold", "--output", str(output)]) == 0
    results = json.loads(output.read_text())
    assert results["machine"]["cpu_count"] >= 1
    assert "fold" in results
    verdicts = {v["figure"]: v for v in results["targets"]}
    assert verdicts["fold.summariser_input_growth_100_to_1000_turns"]["met"] in (True, False)
    assert verdicts["window_vs_langchain.ratio_1000"]["met"] is None  # not run
    assert "summariser input" in capsys.readouterr().out


def test_the_table_and_the_verdicts_follow_the_figures():
    results: dict[str, Any] = {
        "machine": {"cpu_count": 2, "python": "3", "seed": 1},
        "cold_import": {"ratio_vs_boto3": 2.5, "ratio_with_first_call_vs_boto3": 3.5},
    }
    bench_main.derive(results)
    verdicts = {v["figure"]: v["met"] for v in results["targets"]}
    assert verdicts["cold_import.ratio_vs_boto3"] is True
    assert verdicts["cold_import.ratio_with_first_call_vs_boto3"] is False
    assert verdicts["coverage.gaps_within_bound"] is None
    table = bench_main.table(results)
    assert "cold import vs bare boto3" in table
    assert "(not run)" in table


def test_the_emulation_is_measured_as_released_and_fixed_side_by_side():
    figures = emulation.run(exchanges=6, block=3)
    for variant in ("moto", "fixed"):
        assert len(figures[variant]["ms_by_block"]) == 2
        assert all(positive_number(ms) for ms in figures[variant]["ms_by_block"])
        assert isinstance(figures[variant]["memory_growth_mb"], int | float)
    assert positive_number(figures["last_block_ms_ratio_moto_over_fixed"])
    assert positive_number(figures["memory_growth_ratio_moto_over_fixed"])
