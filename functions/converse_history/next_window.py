"""The window a converse call serves, with its memory: one choice for the call and its preview.

The sliding window (SPEC 5.5) over the snapshot's turns, or, for a tenant on
`promptCache: stable`, the cache-stable window and the memory adopted with its
edge. The converse call and the read-only preview (`preview.py`) both call it,
so the preview shows exactly what the next call would serve.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from adapters.conversation_store import ConversationKey, ConversationStore
from converse_history.answers import fold_in_range
from converse_history.stable import stable_choice
from memory_core.conversation import ConversationState, Fold
from memory_core.rules import TenantRules
from memory_core.settings import Settings
from memory_core.stable_window import StableEdge
from memory_core.turns import Turn, TurnPosition
from memory_core.window import Window, WindowLimits, build_window


def snapshot_page_size(settings: Settings) -> int:
    """Items a converse snapshot reads a page: the state, then the cap and one more turn,
    all the window can read."""
    return settings.history_window_max_messages + 2


@dataclass(frozen=True, slots=True)
class WindowChoice:
    window: Window
    memory: Fold | None
    """The memory served beside the window, within the history range; None for none."""
    edge: StableEdge | None
    """The stable window's edge (None for a sliding tenant, or where none holds)."""
    covered_to: TurnPosition | None
    """What the served memory holds up to (its watermark), but its late turns."""


def choose_window(
    store: ConversationStore,
    key: ConversationKey,
    state: ConversationState,
    newest_first: Iterator[Turn],
    *,
    tenant: TenantRules,
    limits: WindowLimits,
    since: datetime,
    turn: Turn,
) -> WindowChoice:
    """The window over the turns before `turn`, newest first, and the memory served with it."""
    window = build_window(newest_first, limits, state.turns_recorded)
    if tenant.prompt_cache != "stable":
        return WindowChoice(window, fold_in_range(state.fold, since), None, state.watermark)
    window, memory, edge = stable_choice(
        store, key, window, state, limits=limits, since=since, tenant=tenant, turn=turn
    )
    covered_to = edge.watermark if edge is not None else state.watermark
    return WindowChoice(window, memory, edge, covered_to)
