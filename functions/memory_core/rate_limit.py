"""The tenant's optional rate limit (SPEC 3): N messages per S seconds, by arrival.

It bounds volume; the turn cap bounds one stretch of conversation. A message
beyond the limit is refused and not recorded, so it does not count either.
The window counts when messages reached the service, on the service's clock:
a limit counted by the caller's `sentAt` could be stepped around by
backdating it (docs/decisions.md, "rate limit by arrival").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from memory_core.rules import RateLimit


def seconds_until_free(
    recent: Sequence[datetime], arrived_at: datetime, limit: RateLimit | None
) -> int:
    """0 when a message arriving now is within the limit; else the whole seconds to wait.

    A slot frees when the oldest of the newest `limit.messages` arrivals leaves
    the period; a wait that is not whole rounds up, so that retrying after it
    succeeds.
    """
    if limit is None:
        return 0
    period = timedelta(seconds=limit.per_seconds)
    # One slightly ahead (another instance's clock) still counts.
    within = sorted(t for t in recent if arrived_at - period < t)
    if len(within) < limit.messages:
        return 0
    # Every counted arrival is later than `arrived_at - period`, so the slot frees after
    # `arrived_at`: the wait is positive and rounds up to at least one second.
    frees_at = within[-limit.messages] + period
    return math.ceil((frees_at - arrived_at).total_seconds())


def remember(
    recent: Sequence[datetime], arrived_at: datetime, limit: RateLimit | None
) -> tuple[datetime, ...]:
    """The newest `limit.messages` arrivals once this message counts: all a check needs."""
    if limit is None:
        return ()
    return tuple(sorted((*recent, arrived_at))[-limit.messages :])
