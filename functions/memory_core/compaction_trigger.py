"""When to ask for a compaction (SPEC 5.8).

Unfolded tokens reaching `MEMORY_FOLD_MIN_TOKENS` is the spec's trigger. The
window also holds at most `HISTORY_WINDOW_MAX_MESSAGES` turns whatever their
size, so many short turns could age out by count before their tokens ever
reach the trigger: unfolded turns reaching half the cap trigger too, the same
2x margin for lag that the token rule keeps.
"""

from __future__ import annotations

from datetime import datetime

from memory_core.conversation import ConversationState
from memory_core.settings import Settings


def turn_trigger(settings: Settings) -> int:
    return max(1, settings.history_window_max_messages // 2)


def compaction_due(state: ConversationState, settings: Settings, now: datetime) -> bool:
    """Enough unfolded conversation, and no compaction in flight (or its lease expired)."""
    enough = (
        state.unfolded_tokens >= settings.memory_fold_min_tokens
        or state.unfolded_turns >= turn_trigger(settings)
    )
    in_flight = state.lease_until is not None and state.lease_until > now
    return enough and not in_flight
