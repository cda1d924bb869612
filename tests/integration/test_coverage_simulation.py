"""The coverage invariant (SPEC 5.7, seed 000) over a long conversation, the fold lagging.

Runs the real service and compactor on the in-memory adapters (their
contract with DynamoDB is checked in `test_store_contract.py`).
"""

from __future__ import annotations

import pytest

from tests.support.simulation import KEY, simulate

PAIRS = 300


@pytest.mark.parametrize("lag", [0, 2, 6])
def test_within_the_bound_no_turn_is_held_by_neither(lag):
    sim, tally = simulate(PAIRS, lag)
    assert tally.gaps_within == 0
    assert tally.calls_within >= PAIRS * 0.9
    state = sim.store.state(KEY)
    assert state is not None
    assert state.fold is not None
    assert state.fold.turns_folded >= 2 * PAIRS - 40


def test_beyond_the_bound_the_gap_is_detected_and_reported():
    _, tally = simulate(PAIRS, lag=80)
    assert tally.calls_beyond > 0
    assert tally.gaps_beyond > 0
    assert tally.gaps_within == 0


def test_every_turn_is_in_the_fold_or_the_window_when_the_fold_keeps_up():
    _, tally = simulate(PAIRS, lag=0)
    for n, answer in enumerate(tally.answers):
        folded = answer["memory"]["turnsFolded"] if answer["memory"] else 0
        assert folded + answer["window"]["kept"] >= 2 * n


def test_the_bounded_prompt_stays_flat_while_the_unbounded_one_grows():
    _, tally = simulate(PAIRS, lag=0)
    assert max(tally.prompt_tokens) < 4000 + 800 + 5000
    assert tally.unbounded_tokens[-1] > 20 * tally.prompt_tokens[-1]
