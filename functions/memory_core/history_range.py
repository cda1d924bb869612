"""Which turns may reach the model at all (SPEC 5.4, seed 002).

History reaches back `historyDays` from the current message's `sentAt`: the
conversation's own clock, so replaying a transcript gives the same windows.
Separately, a turn whose TTL has passed (wall-clock time) is treated as gone,
because DynamoDB deletes expired items lazily, days late.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def history_cutoff(current_sent_at: datetime, history_days: int) -> datetime:
    """The oldest `sentAt` still in range: a turn sent exactly then is in."""
    return current_sent_at - timedelta(days=history_days)


def in_history_range(sent_at: datetime, current_sent_at: datetime, history_days: int) -> bool:
    return history_cutoff(current_sent_at, history_days) <= sent_at


def turn_lifetime_days(retention_days: int, history_days: int) -> int:
    """How long past its `sentAt` a turn is kept: while any message that can see it may arrive.

    A message sees turns up to `history_days` older than its own `sentAt`, and it can
    reach the service late: retried, queued, or replayed with a backdated `sentAt`.
    The turn is kept `history_days` past the newest message that can still see it
    (so a message up to `history_days` late finds its whole range), and never less
    than the retention (docs/decisions.md, "the retention edge").
    """
    return max(retention_days, 2 * history_days)


def expires_at(sent_at: datetime, lifetime_days: int) -> int:
    """The TTL in epoch seconds of an item kept `lifetime_days` from `sent_at`."""
    return int((sent_at + timedelta(days=lifetime_days)).timestamp())


def is_expired(expires_at_epoch: int, now: datetime) -> bool:
    return expires_at_epoch <= now.timestamp()
