"""`make bench`: every figure, then bench/results.json, the plots and a table.

The plots: docs/prompt-tokens.png and docs/prompt-cost.png.

    PYTHONPATH=functions:. .venv/bin/python -m bench [--only NAME ...]

With `--only`, the named figures are measured again and merged into the
results file already there (the others are kept as they were).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, load_average, machine
from local.runner import ensure_import_paths

RESULTS_PATH = REPO_ROOT / "bench" / "results.json"
FIGURES = (
    "window_vs_langchain",
    "dynamodb",
    "cold_import",
    "prompt_tokens",
    "prompt_cost",
    "coverage",
    "fold",
    "local_e2e",
    "emulation",
    "local_runner",
    "write_units",
    "infra_cost",
    "scale_day",
    "recall",
)


def measure(name: str) -> dict[str, Any]:
    """One figure's sections of results.json."""
    # Imported here: each figure's dependencies (moto, LangChain, matplotlib) load when run.
    from bench import (  # noqa: PLC0415
        cold_import,
        coverage,
        dynamodb_reads,
        emulation,
        fold,
        infra_cost,
        local_e2e,
        local_runner,
        prompt_cost,
        prompt_tokens,
        recall,
        scale_day,
        window_vs_langchain,
        write_units,
    )

    def infra_bill() -> dict[str, Any]:
        figures = infra_cost.run()
        infra_cost.plot(figures)
        return {"infra_cost": figures}

    def window() -> dict[str, Any]:
        figures = window_vs_langchain.run()
        figures["profile_size_50"] = window_vs_langchain.profile()
        return {"window_vs_langchain": figures}

    def cold() -> dict[str, Any]:
        figures = cold_import.run()
        figures["profile_ms"] = cold_import.profile()
        figures["project_sources_compile_ms"] = cold_import.project_compile_ms()
        return {"cold_import": figures}

    def prompt() -> dict[str, Any]:
        figures = prompt_tokens.run()
        prompt_tokens.plot(figures)
        return {"prompt_tokens": figures}

    def cost() -> dict[str, Any]:
        figures = prompt_cost.run()
        prompt_cost.plot(figures)
        # Five policies' costs at every call would outweigh the rest of results.json: the
        # plot has them, and `prompt_cost.run()` gives them again, the same for the seed.
        del figures["series"]
        return {"prompt_cost": figures}

    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "window_vs_langchain": window,
        "dynamodb": dynamodb_reads.run,
        "cold_import": cold,
        "prompt_tokens": prompt,
        "prompt_cost": cost,
        "coverage": lambda: {"coverage": coverage.run()},
        "fold": lambda: {"fold": fold.run()},
        "local_e2e": lambda: {"local_e2e": local_e2e.run()},
        "emulation": lambda: {"emulation": emulation.run()},
        "local_runner": lambda: {"local_runner": local_runner.run()},
        "write_units": lambda: {"write_units": write_units.run()},
        "infra_cost": infra_bill,
        "scale_day": lambda: {"scale_day": scale_day.run()},
        "recall": lambda: {"recall": recall.run()},
    }
    if name not in runs:
        raise ValueError(f"unknown figure {name!r}")
    return runs[name]()


@dataclass(frozen=True)
class Target:
    label: str
    path: str
    rule: str
    check: Callable[[float], bool]


def _saving(model: str, pattern: str, baseline: str, floor: float) -> Target:
    """How many times `baseline`'s prompts cost what the stable window's do (bench/prompt_cost)."""
    return Target(
        f"cost, {model} {pattern}: {baseline} / stable",
        f"prompt_cost.{model.lower()}.{pattern}.saving_vs_{baseline}",
        f">= {floor:g}x",
        lambda v: v >= floor,
    )


def _cost(model: str, pattern: str, policy: str) -> tuple[str, str]:
    """A policy's mean cost per converse call, in input-token equivalents (bench/prompt_cost)."""
    return (
        f"cost per call, {model} {pattern}: {policy}",
        f"prompt_cost.{model.lower()}.{pattern}.{policy}.cost_per_converse",
    )


TARGETS = (
    # At 50 messages both take microseconds beside a round trip of milliseconds: what
    # matters is that ours stays flat while trim_messages grows with the conversation.
    Target(
        "window vs trim_messages, 1000 msgs",
        "window_vs_langchain.ratio_1000",
        ">= 30x",
        lambda v: v >= 30,
    ),
    Target(
        "items read, 30 -> 10,000 turns",
        "items_read_per_converse.growth_30_to_10000",
        "<= 1.1",
        lambda v: v <= 1.1,
    ),
    Target(
        "DynamoDB round trips per converse",
        "dynamodb_round_trips_per_converse",
        "<= 2",
        lambda v: v <= 2,
    ),
    Target("cold import vs bare boto3", "cold_import.ratio_vs_boto3", "<= 3x", lambda v: v <= 3),
    Target(
        "cold import + first call's extra vs boto3",
        "cold_import.ratio_with_first_call_vs_boto3",
        "<= 3x",
        lambda v: v <= 3,
    ),
    Target(
        "unbounded / bounded prompt, turn 500",
        "prompt_tokens.unbounded_over_bounded_at_turn_500",
        ">= 20x",
        lambda v: v >= 20,
    ),
    _saving("Claude", "active", "sliding", 2.0),
    _saving("Claude", "active", "trim_messages", 2.0),
    _saving("Nova", "active", "sliding", 1.3),
    _saving("Nova", "active", "trim_messages", 1.3),
    # Past the cache's 5 minutes nothing is read: caching must cost (almost) nothing more.
    _saving("Claude", "idle", "sliding", 0.95),
    _saving("Claude", "idle", "trim_messages", 0.95),
    _saving("Nova", "idle", "sliding", 0.95),
    _saving("Nova", "idle", "trim_messages", 0.95),
    Target(
        "coverage gaps within the bound", "coverage.gaps_within_bound", "== 0", lambda v: v == 0
    ),
    Target(
        "emulation: last 100 exchanges vs first 100",
        "emulation.fixed.ms_last_over_first",
        "<= 1.5",
        lambda v: v <= 1.5,
    ),
    Target(
        "emulation memory growth, moto / fixed",
        "emulation.memory_growth_ratio_moto_over_fixed",
        ">= 5x",
        lambda v: v >= 5,
    ),
    Target(
        "summariser input, turn 100 -> 1000",
        "fold.summariser_input_growth_100_to_1000_turns",
        "<= 1.2",
        lambda v: v <= 1.2,
    ),
    Target(
        "local runner memory, exchange 100 -> 2,000",
        "local_runner.rss_growth",
        "<= 1.3x",
        lambda v: v <= 1.3,
    ),
    Target(
        "local runner p50, exchange 100 -> 2,000",
        "local_runner.p50_growth",
        "<= 1.3x",
        lambda v: v <= 1.3,
    ),
    Target(
        "local runner, 64 parallel calls answered",
        "local_runner.parallel_answered",
        "== 64",
        lambda v: v == 64,
    ),
    # SPEC 10: the contacts index is written once a conversation, never on every call.
    Target(
        "contacts index: WRU added per converse",
        "write_units.added_wru_per_converse",
        "< 1",
        lambda v: v < 1,
    ),
    # What an exchange costs in AWS (bench/infra_cost.py, bench/prices.py).
    Target(
        "WRU per exchange / the floor",
        "infra_cost.wru_over_floor",
        "<= 1.25",
        lambda v: v <= 1.25,
    ),
    Target(
        "USD per million exchanges",
        "infra_cost.usd_per_million_exchanges",
        "<= 18",
        lambda v: v <= 18,
    ),
    Target(
        "AgentCore Memory / ours, per exchange",
        "infra_cost.vs_agentcore_memory",
        ">= 25x",
        lambda v: v >= 25,
    ),
    Target(
        "CloudWatch metrics at 1,000 tenants (USD/mo)",
        "infra_cost.cloudwatch_usd_per_month_at_1000_tenants",
        "<= 50",
        lambda v: v <= 50,
    ),
    Target(
        "hottest partition, share of 1,000 WRU/s",
        "scale_day.hottest_partition_share_of_limit",
        "<= 0.1",
        lambda v: v <= 0.1,
    ),
    Target(
        "recall, handler p50 at 5,000 turns (ms)",
        "recall.p50_ms_at_5000_turns",
        "<= 150",
        lambda v: v <= 150,
    ),
)
INFORMATIONAL = (
    ("window vs trim_messages, 50 msgs", "window_vs_langchain.ratio_50"),
    ("window build, 50 msgs (us)", "window_vs_langchain.ours_us_50"),
    ("trim_messages, 50 msgs (us)", "window_vs_langchain.theirs_us_50"),
    ("window build, 1000 msgs (us)", "window_vs_langchain.ours_us_1000"),
    ("trim_messages, 1000 msgs (us)", "window_vs_langchain.theirs_us_1000"),
    ("items read per converse, 30 turns", "items_read_per_converse.at_30"),
    ("items read per converse, 10,000 turns", "items_read_per_converse.at_10000"),
    ("handler import (ms)", "cold_import.handler_ms"),
    ("bare import boto3 (ms)", "cold_import.boto3_ms"),
    ("first converse call (ms)", "cold_import.first_call_ms"),
    ("second converse call (ms)", "cold_import.second_call_ms"),
    ("bounded prompt, turn 500 (tokens)", "prompt_tokens.bounded_at_turn_500"),
    ("unbounded prompt, turn 500 (tokens)", "prompt_tokens.unbounded_at_turn_500"),
    *(
        _cost(model, pattern, policy)
        for model in ("Claude", "Nova")
        for pattern in ("active", "idle")
        for policy in ("stable", "sliding", "trim_messages", "unbounded")
    ),
    ("coverage gaps beyond the bound", "coverage.gaps_beyond_bound"),
    ("largest lag always within the bound (turns)", "coverage.bound_turns"),
    ("local converse p50 (ms)", "local_e2e.p50_ms"),
    ("local converse p99 (ms)", "local_e2e.p99_ms"),
    ("local runner memory at exchange 100 (MB)", "local_runner.rss_mb_at_100"),
    ("local runner memory at exchange 2,000 (MB)", "local_runner.rss_mb_at_2000"),
    ("local runner p50, exchanges 1-100 (ms)", "local_runner.p50_ms_at_100"),
    ("local runner p99, exchanges 1-100 (ms)", "local_runner.p99_ms_at_100"),
    ("local runner p50, exchanges 1,901-2,000 (ms)", "local_runner.p50_ms_at_2000"),
    ("local runner p99, exchanges 1,901-2,000 (ms)", "local_runner.p99_ms_at_2000"),
    ("WRU per converse, with the contacts index", "write_units.wru_per_converse"),
    ("WRU per converse, before it", "write_units.before.wru_per_converse"),
    ("WRU per reply, with the contacts index", "write_units.wru_per_reply"),
    ("contacts index writes, whole conversation", "write_units.gsi_writes"),
    ("WRU per exchange", "infra_cost.wru_per_exchange"),
    ("WRU floor per exchange", "infra_cost.wru_floor_per_exchange"),
    ("DynamoDB requests per converse", "infra_cost.round_trips_per_converse"),
    ("scale_day: day's cost (USD)", "scale_day.day_cost_usd.total"),
    ("scale_day: peak Lambda concurrency", "scale_day.peak_lambda_concurrency"),
    ("recall, handler p95 at 5,000 turns (ms)", "recall.p95_ms_at_5000_turns"),
    ("recall without the index: read and rank (ms)", "recall.scan_and_rank_ms_without_index"),
    ("recall: index items read per recall", "recall.index_items_read_per_recall"),
)


def lookup(results: dict[str, Any], path: str) -> Any:
    value: Any = results
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def derive(results: dict[str, Any]) -> None:
    """The targets' verdicts, from the figures measured."""
    verdicts = []
    for target in TARGETS:
        value = lookup(results, target.path)
        verdicts.append(
            {
                "figure": target.path,
                "target": target.rule,
                "value": value,
                "met": None if value is None else target.check(float(value)),
            }
        )
    results["targets"] = verdicts


def table(results: dict[str, Any]) -> str:
    info = results["machine"]
    lines = [
        f"make bench: {info['cpu_count']} CPUs, Python {info['python']}, seed {info['seed']}, "
        f"load average {info.get('load_average_1m_at_start')} -> {info.get('load_average_1m')}",
        "",
        f"{'figure':<46} {'value':>12}  {'target':<8} met",
        "-" * 74,
    ]
    for target in TARGETS:
        value = lookup(results, target.path)
        met = "-" if value is None else "yes" if target.check(float(value)) else "NO"
        lines.append(f"{target.label:<46} {_show(value):>12}  {target.rule:<8} {met}")
    lines.append("-" * 74)
    lines.extend(f"{label:<46} {_show(lookup(results, path)):>12}" for label, path in INFORMATIONAL)
    return "\n".join(lines)


def _show(value: Any) -> str:
    if value is None:
        return "(not run)"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", action="append", choices=FIGURES, help="measure only these")
    parser.add_argument("--output", type=Path, default=RESULTS_PATH)
    args = parser.parse_args(argv)
    ensure_import_paths()
    names = args.only or list(FIGURES)
    results: dict[str, Any] = {}
    if args.only and args.output.exists():
        results = json.loads(args.output.read_text(encoding="utf-8"))
    load_at_start = load_average()
    for number, name in enumerate(names, start=1):
        print(f"[{number}/{len(names)}] {name} ...", file=sys.stderr, flush=True)
        before = time.perf_counter()
        results.update(measure(name))
        seconds = time.perf_counter() - before
        results.setdefault("seconds_by_figure", {})[name] = round(seconds, 1)
        print(f"      {seconds:.1f} s", file=sys.stderr, flush=True)
    results["machine"] = {**machine(), "load_average_1m_at_start": load_at_start}
    results["generated_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    results["elapsed_seconds"] = round(sum(results["seconds_by_figure"].values()), 1)
    derive(results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(table(results))
    print(f"\nwrote {_relative(args.output)} in {results['elapsed_seconds']} s")
    if "prompt_tokens" in names:
        print("wrote docs/prompt-tokens.png")
    if "prompt_cost" in names:
        print("wrote docs/prompt-cost.png")
    return 0


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    raise SystemExit(main())
