"""Our window build vs LangChain's `trim_messages` on the same seeded conversations.

Both sides get the conversation in their own native shape, built before the
clock starts: ours a list of `Turn`s (read newest first, as the store hands
them over), theirs a list of `HumanMessage`/`AIMessage`. Each round times one
call of each on every conversation, the order alternating from round to round
and from conversation to conversation, with the garbage collector paused as
`timeit` does. The figure is the median microseconds per call of each, and
the ratio theirs / ours.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import langchain_core
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

from bench.common import SEED, derived_rng, median, rounded
from bench.conversations import Message, as_turns, conversation
from memory_core.settings import load_settings
from memory_core.turns import Turn
from memory_core.window import WindowLimits, build_window

MAX_TOKENS = 4000


def langchain_messages(messages: Sequence[Message]) -> list[BaseMessage]:
    return [
        HumanMessage(content=m.text) if m.role == "user" else AIMessage(content=m.text)
        for m in messages
    ]


def theirs(messages: list[BaseMessage]) -> list[BaseMessage]:
    return trim_messages(
        messages,
        strategy="last",
        max_tokens=MAX_TOKENS,
        token_counter=count_tokens_approximately,
        start_on="human",
    )


def ours(turns: list[Turn], limits: WindowLimits) -> int:
    return build_window(reversed(turns), limits).kept


def _elapsed_us(call: Callable[[], object]) -> float:
    started = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - started) / 1000


def measure_size(
    size: int, conversations: int, rounds: int, limits: WindowLimits
) -> dict[str, Any]:
    drawn = [conversation(derived_rng("window", size, n), size) for n in range(conversations)]
    pairs = [(as_turns(messages), langchain_messages(messages)) for messages in drawn]
    ours_us: list[float] = []
    theirs_us: list[float] = []
    kept_ours = [ours(turns, limits) for turns, _ in pairs]  # also warms both up
    kept_theirs = [len(theirs(messages)) for _, messages in pairs]
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for round_number in range(rounds):
            for index, (turns, messages) in enumerate(pairs):

                def run_ours(turns: list[Turn] = turns) -> object:
                    return build_window(reversed(turns), limits)

                def run_theirs(messages: list[BaseMessage] = messages) -> object:
                    return theirs(messages)

                if (round_number + index) % 2 == 0:
                    ours_us.append(_elapsed_us(run_ours))
                    theirs_us.append(_elapsed_us(run_theirs))
                else:
                    theirs_us.append(_elapsed_us(run_theirs))
                    ours_us.append(_elapsed_us(run_ours))
    finally:
        if was_enabled:
            gc.enable()
    ours_median, theirs_median = median(ours_us), median(theirs_us)
    return {
        "ours_us": rounded(ours_median),
        "theirs_us": rounded(theirs_median),
        "ratio": rounded(theirs_median / ours_median),
        "samples_per_side": len(ours_us),
        "kept_ours": kept_ours,
        "kept_theirs": kept_theirs,
    }


def run(
    sizes: Sequence[int] = (50, 1000), conversations: int = 5, rounds: int = 300
) -> dict[str, Any]:
    limits = load_settings({}).window_limits  # the spec's defaults: 4000 tokens, 25, floor 10
    result: dict[str, Any] = {
        "langchain_core": langchain_core.__version__,
        "conversations_per_size": conversations,
        "seed": SEED,
    }
    for size in sizes:
        figures = measure_size(size, conversations, rounds, limits)
        result[f"ratio_{size}"] = figures["ratio"]
        result[f"ours_us_{size}"] = figures["ours_us"]
        result[f"theirs_us_{size}"] = figures["theirs_us"]
        result[f"samples_per_side_{size}"] = figures["samples_per_side"]
        result[f"kept_ours_{size}"] = figures["kept_ours"]
        result[f"kept_theirs_{size}"] = figures["kept_theirs"]
    return result


def profile(size: int = 50, calls: int = 2000, top: int = 10) -> list[dict[str, Any]]:
    """Where our window's time goes (cProfile, so inflated): the top functions by own time."""
    import cProfile  # noqa: PLC0415 (only when profiling)
    import pstats  # noqa: PLC0415

    limits = load_settings({}).window_limits
    pairs = [as_turns(conversation(derived_rng("window", size, n), size)) for n in range(5)]
    profiler = cProfile.Profile()
    profiler.enable()
    for n in range(calls):
        build_window(reversed(pairs[n % len(pairs)]), limits)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows: list[dict[str, Any]] = []
    total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
    for (path, line, name), entry in stats.stats.items():  # type: ignore[attr-defined]
        primitive_calls, _, own_seconds, _, _ = entry
        rows.append(
            {
                "function": f"{Path(path).name}:{line}({name})",
                "calls_per_build": rounded(primitive_calls / calls, 1),
                "own_share_pct": rounded(100 * own_seconds / total, 1),
            }
        )
    rows.sort(key=lambda row: -float(row["own_share_pct"]))
    return rows[:top]
