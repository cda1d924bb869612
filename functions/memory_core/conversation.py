"""A conversation's state between calls: the cap streak, the fold and the counters.

One record per conversation. The converse call owns the streak, the rate
window and the lease it takes; the compactor owns the fold, the watermark
and its claim; both move the unfolded counters, by increments, so neither
can lose the other's update.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from memory_core.stable_window import StableEdge
from memory_core.turn_cap import NO_STREAK, Streak
from memory_core.turns import TurnPosition


@dataclass(frozen=True, slots=True)
class Fold:
    """The memory: a summary of the turns folded so far, oldest first."""

    summary: str
    covers_from: datetime
    covers_until: datetime
    turns_folded: int
    version: int = 0
    """The compaction version whose commit wrote this summary: how an answer refers to
    it later (a replay answers with the memory its first answer had). 0: not known."""


class LateTurn(NamedTuple):
    """A turn recorded after compaction had passed its position, with what it was counted."""

    position: TurnPosition
    tokens: int


@dataclass(frozen=True, slots=True)
class ConversationState:
    version: int = 0
    """0 for a conversation never recorded; every converse commit adds one."""
    streak: Streak = NO_STREAK
    recent_contact: tuple[datetime, ...] = ()
    """When the contact's newest messages arrived (the service's clock), as many as the
    rate limit needs."""
    unfolded_tokens: int = 0
    unfolded_turns: int = 0
    """What compaction has still to deal with: the turns above the watermark and the late ones."""
    lease_until: datetime | None = None
    """A compaction is in flight until then; a lost one expires."""
    fold: Fold | None = None
    watermark: TurnPosition | None = None
    """Compaction has dealt with every turn up to here: folded it, or passed it over
    because its TTL had passed. The fold's newest turn is at or below it."""
    folding_through: TurnPosition | None = None
    """The newest turn an in-flight compaction is folding (its claim)."""
    late_turns: tuple[LateTurn, ...] = ()
    """Turns recorded after compaction had passed their position, in arrival order:
    the next compaction folds them (docs/decisions.md, "late turns")."""
    compaction_version: int = 0
    """Every compaction commit adds one: the compactors' optimistic lock."""
    turns_recorded: int = 0
    stable_edge: StableEdge | None = None
    """The cache-stable window's edge and the memory it serves (`promptCache: stable`)."""
    last_window_at: datetime | None = None
    """When the newest message a window was served for arrived: the repairs of turns
    recorded until then were reported with that window (`memory_core.repair_incidents`)."""
    erased_at: datetime | None = None
    """The latest erase of the contact: nothing recorded at or before it is served
    (`memory_core.erasure`)."""
    listed: bool = False
    """The conversation has its entry in the tenant's contacts listing."""

    @property
    def late_bound(self) -> TurnPosition | None:
        """A turn recorded at or below this position is late: the watermark or a claim passed it."""
        marks = [m for m in (self.watermark, self.folding_through) if m is not None]
        return max(marks) if marks else None

    @property
    def holds_nothing(self) -> bool:
        """What an erase leaves: the fence and the locks, no turn recorded since."""
        return self.erased_at is not None and self.turns_recorded == 0

    def is_late(self, position: TurnPosition) -> bool:
        bound = self.late_bound
        return bound is not None and position <= bound


NEW_CONVERSATION = ConversationState()
