"""The fold (SPEC 6, seed 000): the memory absorbs the turns newer than its watermark.

The fold and the window are two halves of one memory: the fold holds
everything up to its watermark, the window what the fold has not absorbed
yet. Each turn is folded once, oldest first, into the previous summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_core.conversation import Fold
from memory_core.turns import Turn


def next_fold(previous: Fold | None, folded: Sequence[Turn], summary: str) -> Fold:
    """The fold once `folded` (oldest first, all newer than the watermark) is absorbed."""
    if not folded:
        raise ValueError("a fold absorbs at least one turn")
    newest = folded[-1]
    return Fold(
        summary=summary,
        watermark=newest.position,
        version=(previous.version if previous else 0) + 1,
        covers_from=previous.covers_from if previous else folded[0].sent_at,
        covers_until=newest.sent_at,
        turns_folded=(previous.turns_folded if previous else 0) + len(folded),
    )
