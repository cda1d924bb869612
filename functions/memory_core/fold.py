"""The fold (SPEC 6, seed 000): the memory absorbs the turns newer than its watermark.

The fold and the window are two halves of one memory: the fold holds
everything up to the watermark, the window what the fold has not absorbed
yet. Each turn is folded once, oldest first, into the previous summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory_core.conversation import Fold
from memory_core.history_range import expires_at, is_expired
from memory_core.turns import Turn


def alive(fold: Fold | None, now: datetime, retention_days: int) -> Fold | None:
    """The fold, unless its newest turn is past its retention: then None.

    A summary lives no longer than what it summarises. A conversation whose
    state outlived its turns (say, revived by a new message before DynamoDB
    deleted the expired state) starts a new memory instead of extending the
    old one, which nobody may read any more.
    """
    if fold is None or is_expired(expires_at(fold.covers_until, retention_days), now):
        return None
    return fold


def next_fold(
    previous: Fold | None, folded: Sequence[Turn], summary: str, version: int = 0
) -> Fold:
    """The fold once `folded` (oldest first) is absorbed, written by compaction `version`.

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
        version=version,
    )
