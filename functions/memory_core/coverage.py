"""The coverage check (SPEC 5.7): every candidate turn is held by the fold or the window.

The fold holds every turn up to its watermark; the window holds a run of the
newest turns. A candidate between the two is held by neither: the model will
never see it, and nothing says so unless this check does.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_core.turns import Turn, TurnPosition


def held_by_neither(
    candidates: Iterable[Turn],
    window_oldest: TurnPosition | None,
    fold_watermark: TurnPosition | None,
) -> list[Turn]:
    """The candidates older than the window's oldest turn and newer than the watermark.

    `window_oldest` is None for an empty window, `fold_watermark` None when
    nothing has been folded yet.
    """
    return [
        turn
        for turn in candidates
        if (window_oldest is None or turn.position < window_oldest)
        and (fold_watermark is None or turn.position > fold_watermark)
    ]
