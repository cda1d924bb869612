"""The tenant's optional rate limit (SPEC 3): N messages per S seconds, by `sentAt`.

It bounds volume; the turn cap bounds one stretch of conversation. A message
beyond the limit is refused and not recorded, so it does not count either.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from memory_core.rules import RateLimit


def exceeds_rate(recent: Sequence[datetime], sent_at: datetime, limit: RateLimit | None) -> bool:
    """True when `limit.messages` of the contact's messages already fall within the period."""
    if limit is None:
        return False
    since = sent_at - timedelta(seconds=limit.per_seconds)
    return sum(1 for earlier in recent if since < earlier <= sent_at) >= limit.messages


def remember(
    recent: Sequence[datetime], sent_at: datetime, limit: RateLimit | None
) -> tuple[datetime, ...]:
    """The newest `limit.messages` timestamps once this message counts: all a check needs."""
    if limit is None:
        return ()
    return tuple(sorted((*recent, sent_at))[-limit.messages :])
