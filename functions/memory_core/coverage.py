"""The coverage check (SPEC 5.7): every candidate turn is held by the fold or the window.

The fold holds every turn up to the watermark except the late ones not
folded yet (recorded after compaction had passed their position; the next
compaction folds them); the window holds a run of the newest turns. A
candidate held by neither will not reach the model, and nothing says so
unless this check does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime

from memory_core.turns import Turn, TurnPosition


def held_by_neither(
    passed_over: Iterable[Turn],
    window_oldest: TurnPosition | None,
    watermark: TurnPosition | None,
    *,
    late: Collection[TurnPosition] = (),
    since: datetime | None = None,
    before: TurnPosition | None = None,
) -> list[TurnPosition]:
    """The candidates the window left out that the fold does not hold.

    `passed_over` are the candidates the window read and left out: older than
    its oldest turn, or inside an exchange longer than the cap whose middle it
    omits (SPEC 5.5.7). Older candidates are below the watermark if the
    oldest of these is, so only a late turn can hide there: those are taken
    from `late` (the state's list), from `since` on and older than anything
    the window read (or than `before`, the current message, when it read
    nothing). `window_oldest` is None for an empty window, `watermark` None
    when compaction has not run yet.
    """
    read = [turn.position for turn in passed_over]
    missing = [
        position
        for position in read
        if watermark is None or position > watermark or position in late
    ]
    if late:
        edges = read if window_oldest is None else [*read, window_oldest]
        horizon = min(edges) if edges else before
        missing += [
            position
            for position in late
            if (horizon is None or position < horizon)
            and (since is None or position.sent_at >= since)
        ]
    return sorted(missing)
