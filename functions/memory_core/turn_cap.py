"""The turn cap's streak (SPEC 5.3, seed 002): it restarts after an idle gap.

The streak counts the contact's messages since the last gap of at least
`idleResetHours` between two of them; the first message after such a gap
counts one. A cap that never reset would escalate a returning contact for
good, so the count belongs to one stretch of conversation, not to the contact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class Streak:
    count: int
    last_contact_at: datetime | None
    """The latest `sentAt` among the contact's messages so far."""


NO_STREAK = Streak(0, None)


def next_streak(previous: Streak, sent_at: datetime, idle_reset_hours: int) -> Streak:
    """The streak once the contact's message sent at `sent_at` is counted.

    A message older than the last one (a late, out-of-order delivery) is no gap:
    it counts within the running streak and leaves the last contact time alone.
    """
    last = previous.last_contact_at
    if last is None or sent_at - last >= timedelta(hours=idle_reset_hours):
        return Streak(1, sent_at)
    return Streak(previous.count + 1, max(last, sent_at))


def streak_of(sent_ats: Iterable[datetime], idle_reset_hours: int) -> Streak:
    """The streak after the contact's messages, in the order they arrived."""
    streak = NO_STREAK
    for sent_at in sent_ats:
        streak = next_streak(streak, sent_at, idle_reset_hours)
    return streak


def exceeds_cap(streak: Streak, max_turns: int) -> bool:
    """Past the cap the model must not run: the conversation goes to a person."""
    return streak.count > max_turns
