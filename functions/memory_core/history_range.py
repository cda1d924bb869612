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


def expires_at(sent_at: datetime, retention_days: int) -> int:
    """The turn's TTL in epoch seconds: kept for the retention period from `sentAt`."""
    return int((sent_at + timedelta(days=retention_days)).timestamp())


def is_expired(expires_at_epoch: int, now: datetime) -> bool:
    return expires_at_epoch <= now.timestamp()
