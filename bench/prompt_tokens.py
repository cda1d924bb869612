"""Tokens handed to the model over a long session: our window and fold vs every message.

A seeded session through the real service and compactor on the in-memory
adapters (`tests/support/simulation.py`), the fold lagging a little behind
(each compaction request is served `LAG_TURNS` turns after it was made). At
every converse call the simulation adds up what the model is handed: the
window's history, the memory's summary and the current message, against the
whole conversation so far plus the current message. Both use the service's
own estimate (memory_core/tokens.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, median
from tests.support.simulation import simulate

LAG_TURNS = 2
"""One exchange behind: the compactor serves a request while the next exchange arrives."""
SEED = 7
PLOT_PATH = REPO_ROOT / "docs" / "prompt-tokens.png"


def run(pairs: int = 250, lag: int = LAG_TURNS, seed: int = SEED) -> dict[str, Any]:
    sim, tally = simulate(pairs, lag, seed)
    turns = 2 * pairs
    bounded, unbounded = tally.prompt_tokens[-1], tally.unbounded_tokens[-1]
    return {
        f"bounded_at_turn_{turns}": bounded,
        f"unbounded_at_turn_{turns}": unbounded,
        f"unbounded_over_bounded_at_turn_{turns}": round(unbounded / bounded, 2),
        "bounded_max": max(tally.prompt_tokens),
        # One call's figure moves with the size of its current message; the typical one:
        "bounded_median_after_turn_100": median(tally.prompt_tokens[50:] or tally.prompt_tokens),
        "turns": turns,
        "lag_turns": lag,
        "simulation_seed": seed,
        "compactions": len(sim.observed.compactions),
        "series": {
            # The turn number of each converse call: the contact's messages are the odd turns.
            "turn": [2 * n + 1 for n in range(pairs)],
            "bounded": list(tally.prompt_tokens),
            "unbounded": list(tally.unbounded_tokens),
        },
    }


def plot(figures: dict[str, Any], path: Path = PLOT_PATH) -> Path:
    """Both curves over the session, on a log scale: the bounded one is a flat line."""
    import matplotlib  # noqa: PLC0415 (only `make bench` plots)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    series = figures["series"]
    turns = figures["turns"]
    bounded = figures[f"bounded_at_turn_{turns}"]
    unbounded = figures[f"unbounded_at_turn_{turns}"]
    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=120)
    axes.plot(series["turn"], series["unbounded"], label="every message so far (unbounded)")
    axes.plot(series["turn"], series["bounded"], label="window + memory + current (ours)")
    axes.set_yscale("log")
    axes.set_xlabel("turn")
    axes.set_ylabel("estimated prompt tokens (log scale)")
    axes.set_title(
        f"Prompt tokens over a seeded {turns}-turn session: "
        f"{unbounded:,} vs {bounded:,} at turn {turns}"
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
    return path
