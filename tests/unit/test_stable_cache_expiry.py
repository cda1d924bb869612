"""The stable window when the cache has surely expired: a move then costs nothing more.

A prefix outlives its last hit by at most the TTL; the newest turn recorded
stands for the model's last call. Past that, the edge moves whenever moving
leaves turns out, and the newest memory is adopted even where it does not.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory_core.stable_window import StableEdge, cache_expired, stable_window
from memory_core.turns import Turn, TurnPosition
from tests.unit.conversation_builders import Clock, alternating, default_limits, window_of

LIMITS = default_limits()


def session(messages: int) -> list[Turn]:
    return alternating(Clock(), messages, tokens_each=100)


def newest_recorded(turns: list[Turn]) -> TurnPosition:
    return turns[-1].position


@pytest.mark.parametrize(
    ("ttl", "after", "expired"),
    [
        ("5m", timedelta(minutes=5), False),
        ("5m", timedelta(minutes=5, microseconds=1), True),
        ("1h", timedelta(minutes=59), False),
        ("1h", timedelta(hours=1), False),
        ("1h", timedelta(hours=1, microseconds=1), True),
    ],
)
def test_the_cache_expires_only_past_the_ttl_after_the_newest_turn(ttl, after, expired):
    turns = session(4)
    window = window_of(turns)
    arrival = newest_recorded(turns).recorded_at + after
    assert cache_expired(window, arrival, ttl) is expired


def test_no_history_means_nothing_cached():
    assert cache_expired(window_of([]), session(1)[0].sent_at, "1h")


def choose(turns: list[Turn], edge: StableEdge, *, expired: bool):
    return stable_window(
        window_of(turns),
        LIMITS,
        edge,
        memory_version=7,
        watermark=turns[-3].position,
        cache_expired=expired,
    )


def test_an_expired_cache_moves_an_edge_that_would_otherwise_stay():
    turns = session(22)
    edge = StableEdge(turns[0].position, memory_version=3, watermark=None)
    warm = choose(turns, edge, expired=False)
    assert not warm.moved
    assert warm.window.kept == 22
    cold = choose(turns, edge, expired=True)
    assert cold.moved
    assert cold.edge is not None
    assert cold.edge.memory_version == 7
    assert cold.window.kept < 22
    assert cold.window.kept <= LIMITS.max_messages // 2
    assert cold.window.turns == warm.window.turns[-cold.window.kept :]


def test_an_expired_cache_with_nothing_to_leave_out_keeps_the_edge_and_adopts_the_memory():
    turns = session(10)  # the floor: nothing may be left out
    edge = StableEdge(turns[0].position, memory_version=3, watermark=None)
    cold = choose(turns, edge, expired=True)
    assert cold.moved
    assert cold.window.kept == 10
    assert cold.edge == StableEdge(turns[0].position, 7, turns[-3].position)
