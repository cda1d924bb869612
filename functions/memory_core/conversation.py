"""A conversation's state between calls: the cap streak, the fold and the counters.

One record per conversation. The converse call owns the streak, the rate
window and the lease it takes; the compactor owns the fold; both move the
unfolded counters, by increments, so neither can lose the other's update.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memory_core.turn_cap import NO_STREAK, Streak
from memory_core.turns import TurnPosition


@dataclass(frozen=True, slots=True)
class Fold:
    """The memory: a summary of every turn up to `watermark`, oldest first."""

    summary: str
    watermark: TurnPosition
    version: int
    covers_from: datetime
    covers_until: datetime
    turns_folded: int


@dataclass(frozen=True, slots=True)
class ConversationState:
    version: int = 0
    """0 for a conversation never recorded; every converse commit adds one."""
    streak: Streak = NO_STREAK
    recent_contact: tuple[datetime, ...] = ()
    """The newest `sentAt`s of the contact's messages, as many as the rate limit needs."""
    unfolded_tokens: int = 0
    unfolded_turns: int = 0
    lease_until: datetime | None = None
    """A compaction is in flight until then; a lost one expires."""
    fold: Fold | None = None
    turns_recorded: int = 0


NEW_CONVERSATION = ConversationState()
