"""The cache-stable window of a converse call (`promptCache: stable`), with its memory and edge.

`memory_core.stable_window` decides where the window starts; this reads what
that decision needs from the store: the memory adopted when the edge moved.
"""

from __future__ import annotations

from datetime import datetime

from adapters.conversation_store import ConversationKey, ConversationStore
from converse_history.answers import fold_in_range
from converse_history.kept_memories import memory_of_version
from memory_core.conversation import ConversationState, Fold
from memory_core.rules import TenantRules
from memory_core.stable_window import StableEdge, cache_expired, moved_edge, stable_window
from memory_core.turns import Turn
from memory_core.window import Window, WindowLimits


def stable_choice(
    store: ConversationStore,
    key: ConversationKey,
    sliding: Window,
    state: ConversationState,
    *,
    limits: WindowLimits,
    since: datetime,
    tenant: TenantRules,
    turn: Turn,
) -> tuple[Window, Fold | None, StableEdge | None]:
    """The cache-stable window, its memory and its edge.

    While the edge stays, the memory adopted when it moved is served: the
    current one if no fold came since, else the copy kept by version (one
    read). Where that copy is gone, the edge moves, adopting the current one.
    """
    expired = cache_expired(sliding, turn.position.recorded_at, tenant.prompt_cache_ttl)
    current = fold_in_range(state.fold, since)
    version = current.version if current else 0
    late = {entry.position for entry in state.late_turns}
    choice = stable_window(
        sliding,
        limits,
        state.stable_edge,
        memory_version=version,
        watermark=state.watermark,
        late=late,
        cache_expired=expired,
    )
    if choice.moved or choice.edge is None:
        return choice.window, current, choice.edge
    found, served = memory_of_version(store, key, choice.edge.memory_version, state.fold)
    if not found:
        choice = moved_edge(
            sliding, limits, memory_version=version, watermark=state.watermark, late=late
        )
        return choice.window, current, choice.edge
    return choice.window, fold_in_range(served, since), choice.edge
