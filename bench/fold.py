"""The summariser's input for one compaction early and late in a conversation.

Incremental folding reads the previous summary (capped) and the turns newer
than the watermark, never the whole conversation. The real service and
compactor run on the in-memory adapters (`tests/support/simulation.py`):
a seeded session of ~100 (then ~1000) turns with the fold keeping up, then
everything folded, then the same ten turns recorded (the same texts, so
only the conversation's length differs), then one compaction, whose
summariser input tokens are read from its result.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from compactor.service import Outcome

from adapters.summariser import transcript
from bench.common import derived_rng
from bench.conversations import corpus, message_text
from converse_history.service import Incoming
from memory_core.tokens import estimate_tokens
from tests.support.simulation import CALLER, KEY, Simulation, simulate

UNFOLDED_PAIRS = 5
"""The same ten unfolded turns at every length."""
SEED = 7


def fold_everything(sim: Simulation) -> None:
    while sim.compactor.compact(KEY).outcome is Outcome.FOLDED:
        pass
    sim.queue.requests.clear()


def measured_compaction(turns: int, seed: int = SEED) -> dict[str, int]:
    """Input tokens of the compaction that folds the last ten of `turns` turns."""
    pairs_before = turns // 2 - UNFOLDED_PAIRS
    sim, _ = simulate(pairs_before, lag=0, seed=seed)
    fold_everything(sim)
    rng = derived_rng("fold-unfolded")
    source = corpus(rng)
    start = datetime.now(UTC) - timedelta(minutes=2 * UNFOLDED_PAIRS + 1)
    for n in range(UNFOLDED_PAIRS):
        at = start + timedelta(minutes=2 * n)
        question = Incoming(f"fq{n}", "user", [{"text": message_text(rng, source)}], at)
        sim.service.converse(KEY.tenant_id, KEY.contact_id, question, CALLER)
        answer = Incoming(
            f"fa{n}", "assistant", [{"text": message_text(rng, source)}], at + timedelta(minutes=1)
        )
        sim.service.record(KEY.tenant_id, KEY.contact_id, answer, CALLER)
    previous = sim.store.state(KEY)
    assert previous is not None
    assert previous.fold is not None
    compaction = sim.compactor.compact(KEY)
    assert compaction.outcome is Outcome.FOLDED
    assert compaction.summary is not None
    everything = [s.turn for s in sim.store.unfolded_turns(KEY, None, 10 * turns)]
    return {
        "turns": len(everything),
        "turns_folded": compaction.turns_folded,
        "input_tokens": compaction.summary.input_tokens,
        "previous_summary_tokens": estimate_tokens(previous.fold.summary),
        "whole_transcript_tokens": estimate_tokens(transcript(everything)),
    }


def run(early: int = 100, late: int = 1000, seed: int = SEED) -> dict[str, Any]:
    at_early, at_late = measured_compaction(early, seed), measured_compaction(late, seed)
    return {
        f"summariser_input_growth_{early}_to_{late}_turns": round(
            at_late["input_tokens"] / at_early["input_tokens"], 3
        ),
        f"summariser_input_tokens_at_{early}": at_early["input_tokens"],
        f"summariser_input_tokens_at_{late}": at_late["input_tokens"],
        "turns_folded_per_compaction": at_late["turns_folded"],
        f"previous_summary_tokens_at_{early}": at_early["previous_summary_tokens"],
        f"previous_summary_tokens_at_{late}": at_late["previous_summary_tokens"],
        # What a fold that re-read the whole conversation would hand the summariser.
        f"whole_transcript_tokens_at_{late}": at_late["whole_transcript_tokens"],
        "simulation_seed": seed,
    }
