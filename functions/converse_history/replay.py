"""A message id seen before: what its first converse answered, again, nothing written.

The marker kept what the answer needs (the turn count, the decision, what the
window dropped, the memory's version and the stable window's edge); the
window is built again over the same turns, up to the first recording's place.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from adapters.conversation_store import ConversationKey, ConversationStore, RecordedTurn
from converse_history.answers import escalation, fold_in_range, window_answer
from converse_history.kept_memories import memory_of_version
from memory_core.conversation import Fold
from memory_core.history_range import history_cutoff
from memory_core.rules import TenantRules
from memory_core.stable_window import start_of, suffix_from
from memory_core.turns import Turn
from memory_core.window import WindowLimits, build_window


class ReplayTelemetry(Protocol):
    def replay_memory_missing(self, key: ConversationKey, version: int) -> None: ...


def replayed_answer(
    store: ConversationStore,
    telemetry: ReplayTelemetry,
    key: ConversationKey,
    *,
    tenant: TenantRules,
    limits: WindowLimits,
    page_size: int,
    turn: Turn,
    first: RecordedTurn,
) -> dict[str, Any]:
    """The first answer to `turn`'s id, whose recording `first` describes."""
    original = Turn(turn.id, turn.role, turn.content, first.position.sent_at)
    count = first.turn_count or 0
    if first.decision == "escalate":
        return escalation(count, original)
    since = history_cutoff(original.sent_at, tenant.history_days)
    snapshot = store.snapshot(key, since, first.position, page_size)
    window = build_window(snapshot.newest_first, limits)
    if first.window_from is not None:
        # The first answer's stable window: the same run from its edge.
        start = start_of(window, first.window_from)
        if start is not None:
            window = suffix_from(window, start)
    if first.dropped is not None:
        window = replace(window, dropped=first.dropped)
    served = _memory_first_served(store, telemetry, key, first, snapshot.state.fold)
    answer, _ = window_answer(count, original, window, fold_in_range(served, since), tenant=tenant)
    return answer  # its repairs were reported with the first answer


def _memory_first_served(
    store: ConversationStore,
    telemetry: ReplayTelemetry,
    key: ConversationKey,
    first: RecordedTurn,
    current: Fold | None,
) -> Fold | None:
    """The memory the first answer served, though compaction may have folded since.

    A newer memory would show the model a summary of the retried message and
    of later ones. A marker from before versions were kept has only the
    current memory to offer.
    """
    version = first.memory_version
    if version is None:
        return current
    found, memory = memory_of_version(store, key, version, current)
    if not found:
        # Past its TTL, or written before memories were kept by version: none
        # rather than one that may summarise the future.
        telemetry.replay_memory_missing(key, version)
    return memory
