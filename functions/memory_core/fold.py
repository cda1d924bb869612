"""The fold (SPEC 6, seed 000): the memory absorbs the turns newer than its watermark.

The fold and the window are two halves of one memory: the fold holds
everything up to the watermark, the window what the fold has not absorbed
yet. Each turn is folded once, oldest first, into the previous summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.conversation import Fold
from memory_core.turns import Turn


def next_fold(previous: Fold | None, folded: Sequence[Turn], summary: str) -> Fold:
    """The fold once `folded` (oldest first) is absorbed.

    `folded` is newer than the watermark, except for late turns, which may be
    older than anything folded so far: the covered range widens to take them.
    """
    if not folded:
        raise ValueError("a fold absorbs at least one turn")
    oldest, newest = folded[0].sent_at, folded[-1].sent_at
    return Fold(
        summary=summary,
        covers_from=min(previous.covers_from, oldest) if previous else oldest,
        covers_until=max(previous.covers_until, newest) if previous else newest,
        turns_folded=(previous.turns_folded if previous else 0) + len(folded),
    )
