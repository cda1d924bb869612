"""An erased conversation: the fence that hides what was recorded before the erase.

An erase answers at once, and deleting tens of thousands of items takes
longer. So it first replaces the conversation's state with a fresh one that
carries the erase's instant, `erased_at`; from then on every read passes over
whatever was recorded at or before it, while the deletion finishes behind.

The conversation after an erase begins after the fence: a turn recorded in it
is placed after the fence, whatever its `sentAt` or its writer's clock (one in
flight while the erase answered, a late reply stamped in the past). So the
fence is a place in the conversation too: everything at or before it, and
nothing after it, is erased, and a reader stops there instead of passing over
turns the deletion has not reached yet.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from memory_core.conversation import Fold
from memory_core.turns import Turn, TurnPosition

RESOLUTION = timedelta(microseconds=1)
"""The finest step of a stored instant: the first instant after a fence."""


def erased(position: TurnPosition, erased_at: datetime | None) -> bool:
    """At or before the conversation's latest erase: never served again."""
    return erased_at is not None and position.sent_at <= erased_at


def memory_erased(fold: Fold, erased_at: datetime | None) -> bool:
    """A memory of turns at or before the latest erase: it is never served again. (A fold
    made after an erase covers turns placed after its fence only.)"""
    return erased_at is not None and fold.covers_until <= erased_at


def marker_erased(recorded_at: datetime, erased_at: datetime | None) -> bool:
    """A message id recorded at or before the latest erase: the id is a new message's."""
    return erased_at is not None and recorded_at <= erased_at


def placed_after(turn: Turn, erased_at: datetime | None, now: datetime) -> Turn:
    """The turn, placed after the fence if it is not already: sent and arrived no earlier
    than the fence's next instant, its arrival no earlier than `now`. The `sentAt` it
    gave is kept as its stated one."""
    if erased_at is None or turn.sent_at > erased_at:
        return turn
    first = erased_at + RESOLUTION
    recorded_at = turn.recorded_at or turn.sent_at
    return replace(
        turn,
        sent_at=first,
        recorded_at=max(recorded_at, now, first),
        stated_sent_at=turn.stated_sent_at or turn.sent_at,
    )
