"""A repair is one incident: reported by the first window it appears in, not by every one.

A tool call whose result never came is mended in every window that holds it,
call after call, until it scrolls out. Reported by each, one crashed tool
reads as dozens of incidents and floods the logs. The window served before
this one held the turns recorded up to its own message (those that this one
still holds), so its repairs are the repairs of those turns alone: what this
fragment mends beyond them is new.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from memory_core.converse_shape import merged_by_role
from memory_core.repairs import Repair, repair_tool_blocks
from memory_core.turns import Turn


def first_appearances(
    repairs: Sequence[Repair], history: Sequence[Turn], last_window_at: datetime | None
) -> list[Repair]:
    """The repairs of this fragment that the window served at `last_window_at` did not make.

    `history` is this window's turns, oldest first; `last_window_at` the arrival
    of the newest message a window was served for (None: there was none). A
    repair is told by its kind and tool call, so that a mend that moved to
    another message index (the history grew, or scrolled) is still the same one.
    """
    if not repairs or last_window_at is None:
        return list(repairs)
    shown = [turn.as_message() for turn in history if turn.position.recorded_at <= last_window_at]
    _, earlier = repair_tool_blocks(merged_by_role(shown))
    reported = Counter((repair.kind, repair.tool_use_id) for repair in earlier)
    new: list[Repair] = []
    for repair in repairs:
        identity = (repair.kind, repair.tool_use_id)
        if reported[identity]:
            reported[identity] -= 1
        else:
            new.append(repair)
    return new
