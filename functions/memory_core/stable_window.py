"""The cache-stable window (SPEC 5, prompt caching, `promptCache: stable`).

Bedrock caches a prompt's prefix. The sliding window's oldest edge moves with
almost every turn, so the history is a new prefix each time and is never read
from the cache. This window keeps its oldest edge where it was between calls,
so each call's history is the last call's plus the newest turns, and moves the
edge only when it must: when the run from the edge no longer fits the cap, the
budget or the floor, or its oldest turn is no longer a candidate. It then moves
far enough to leave room for several more exchanges (half the budget and half
the cap free), never past a turn that the memory does not hold.

The memory sits before the history in the prompt: a newer memory would make
the whole cached history a new prefix. The memory served is the one adopted
when the edge last moved (`StableEdge.memory_version`); a newer fold is
adopted with the next move, so that one cache write pays for both.

Every window rule holds because the stable window is always a run of the
sliding window's newest turns (which is the longest run the rules allow)
starting on a question and holding at least what the floor keeps.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from memory_core.rules.model import PromptCacheTtl
from memory_core.turns import TurnPosition
from memory_core.window import Window, WindowLimits

MOVE_ROOM_SHARE = 2
"""After a move the window holds at most 1/2 of the budget and of the cap (unless the
floor or the memory's coverage asks for more): the other half is room for the
exchanges to come before the edge moves again."""


CACHE_TTL: dict[PromptCacheTtl, timedelta] = {
    "5m": timedelta(minutes=5),
    "1h": timedelta(hours=1),
}


def cache_expired(sliding: Window, arrival: datetime, ttl: PromptCacheTtl) -> bool:
    """Whether the previous call's prefix has surely left the cache by `arrival`.

    The newest turn recorded stands for the model's last call (its reply, or
    the question it was to answer); a cache hit resets the TTL, so a prefix
    outlives it by at most the TTL.
    """
    if not sliding.turns:
        return True
    return arrival - sliding.turns[-1].position.recorded_at > CACHE_TTL[ttl]


@dataclass(frozen=True, slots=True)
class StableEdge:
    """Where the window's oldest edge stands, and the memory served since it moved there."""

    oldest: TurnPosition
    """The oldest turn of the window when the edge moved."""
    memory_version: int
    """The version of the memory adopted with the move (`Fold.version`); 0 for none."""
    watermark: TurnPosition | None
    """The compaction watermark when the edge moved: that memory holds every turn up to
    it (but the late ones). None when nothing had been folded."""


@dataclass(frozen=True, slots=True)
class StableChoice:
    window: Window
    edge: StableEdge | None
    """None where the window is not a run from an edge (an exchange longer than the cap,
    or no history): the next call moves it again."""
    moved: bool
    """The edge moved with this call: the current memory is adopted."""


def stable_window(
    sliding: Window,
    limits: WindowLimits,
    edge: StableEdge | None,
    *,
    memory_version: int,
    watermark: TurnPosition | None,
    late: Collection[TurnPosition] = (),
    cache_expired: bool = False,
) -> StableChoice:
    """The window from `edge` when it still holds; otherwise a moved edge.

    `sliding` is the seed's window over the same candidates (`build_window`).
    `memory_version` and `watermark` describe the memory the caller would adopt
    with a move (the current fold in range, and the compaction watermark);
    `late` are the turns recorded below the watermark and not folded yet.
    `cache_expired`: the previous call's prefix has left the cache (its TTL
    passed), so a move costs nothing more: the edge is chosen afresh, with the
    newest memory (the same edge, where that is where a move would put it).
    """

    def move() -> StableChoice:
        return moved_edge(
            sliding, limits, memory_version=memory_version, watermark=watermark, late=late
        )

    if edge is None or cache_expired:
        return move()
    start = start_of(sliding, edge.oldest)
    if start is None or len(sliding.turns) - start < sliding.floor_kept:
        return move()
    return StableChoice(suffix_from(sliding, start), edge, moved=False)


def moved_edge(
    sliding: Window,
    limits: WindowLimits,
    *,
    memory_version: int,
    watermark: TurnPosition | None,
    late: Collection[TurnPosition] = (),
) -> StableChoice:
    """The edge moved: the longest run within the share of the budget and the cap
    (`MOVE_ROOM_SHARE`), but never fewer turns than the floor keeps, nor leaving out a
    turn the memory to adopt does not hold."""
    if sliding.omission is not None or not sliding.turns:
        return StableChoice(sliding, None, moved=True)
    turns = sliding.turns
    starts = [index for index, turn in enumerate(turns) if turn.is_question]
    count = len(turns)
    tokens_from = _tokens_from(sliding.turn_tokens)
    max_tokens = limits.max_tokens // MOVE_ROOM_SHARE
    max_messages = limits.max_messages // MOVE_ROOM_SHARE
    roomy = next(
        (s for s in starts if tokens_from[s] <= max_tokens and count - s <= max_messages),
        starts[-1],
    )
    floor_start = count - sliding.floor_kept
    start = min(roomy, floor_start, _covered_start(sliding, starts, watermark, late))
    moved = StableEdge(turns[start].position, memory_version, watermark)
    return StableChoice(suffix_from(sliding, start), moved, moved=True)


def suffix_from(window: Window, start: int) -> Window:
    """`window` without its `start` oldest turns (they join the turns passed over)."""
    if start == 0:
        return window
    left_out = window.turns[:start]
    return Window(
        turns=window.turns[start:],
        dropped=window.dropped + start,
        estimated_tokens=sum(window.turn_tokens[start:]),
        passed_over=(*reversed(left_out), *window.passed_over),
        turn_tokens=window.turn_tokens[start:],
        trimmed_turns=window.trimmed_turns[start:],
        floor_kept=window.floor_kept,
    )


def start_of(window: Window, oldest: TurnPosition) -> int | None:
    """Where a run from `oldest` starts in `window`, if `oldest` is one of its questions."""
    if window.omission is not None:
        return None
    for index, turn in enumerate(window.turns):
        if turn.position == oldest:
            return index if turn.is_question else None
        if turn.position > oldest:
            return None
    return None


def _tokens_from(turn_tokens: tuple[int, ...]) -> list[int]:
    """For each index, the tokens from that turn to the newest."""
    totals = [0] * (len(turn_tokens) + 1)
    for index in range(len(turn_tokens) - 1, -1, -1):
        totals[index] = totals[index + 1] + turn_tokens[index]
    return totals


def _covered_start(
    window: Window,
    starts: list[int],
    watermark: TurnPosition | None,
    late: Collection[TurnPosition],
) -> int:
    """The newest question the edge may move to: every turn before it is in the memory."""
    uncovered = next(
        (
            index
            for index, turn in enumerate(window.turns)
            if watermark is None or turn.position > watermark or turn.position in late
        ),
        len(window.turns),
    )
    return max((s for s in starts if s <= uncovered), default=0)


def previous_call_history(window: Window) -> int | None:
    """How many of the window's turns the previous converse call's history ended with.

    That call's message is the newest question here (a tool loop's results and
    the replies follow it), and its history was everything before it. None
    where that is not a run of this window's turns.
    """
    if window.omission is not None:
        return None
    for index in range(len(window.turns) - 1, 0, -1):
        if window.turns[index].is_question:
            return index
    return None
