"""Coverage over a 1000-turn session while the fold lags by k turns (SPEC 5.7, seed 000).

The real service and compactor on the in-memory adapters
(`tests/support/simulation.py`); each compaction request is folded only
after `lag` more turns arrived. Before every converse call the simulation
decides whether the unfolded turns still fit what the window is guaranteed
to hold (the 2x rule's bound, in tokens and in messages), and counts the
calls where some in-range turn was held by neither the fold nor the window
(the service's own `converse_history_coverage_gap` signal), within the bound
and beyond it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.support.simulation import simulate

LAGS = (0, 1, 2, 4, 6, 8, 12, 16, 24, 40, 80)
SEED = 7


def run(pairs: int = 500, lags: Sequence[int] = LAGS, seed: int = SEED) -> dict[str, Any]:
    per_lag: list[dict[str, int]] = []
    for lag in lags:
        _, tally = simulate(pairs, lag, seed)
        per_lag.append(
            {
                "lag_turns": lag,
                "calls_within": tally.calls_within,
                "calls_beyond": tally.calls_beyond,
                "gaps_within": tally.gaps_within,
                "gaps_beyond": tally.gaps_beyond,
            }
        )
    always_within = [row["lag_turns"] for row in per_lag if row["calls_beyond"] == 0]
    gapless = [row["lag_turns"] for row in per_lag if row["gaps_within"] + row["gaps_beyond"] == 0]
    return {
        "gaps_within_bound": sum(row["gaps_within"] for row in per_lag),
        "gaps_beyond_bound": sum(row["gaps_beyond"] for row in per_lag),
        # The largest lag at which no converse call ever left the bound.
        "bound_turns": max(always_within) if always_within else None,
        "largest_lag_without_gaps": max(gapless) if gapless else None,
        "calls_within_bound": sum(row["calls_within"] for row in per_lag),
        "calls_beyond_bound": sum(row["calls_beyond"] for row in per_lag),
        "turns": 2 * pairs,
        "simulation_seed": seed,
        "per_lag": per_lag,
    }
