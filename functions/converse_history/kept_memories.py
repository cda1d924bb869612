"""The memory a compaction wrote, by its version: what a replay and the stable window serve."""

from __future__ import annotations

from adapters.conversation_store import ConversationKey, ConversationStore
from memory_core.conversation import Fold


def memory_of_version(
    store: ConversationStore, key: ConversationKey, version: int, current: Fold | None
) -> tuple[bool, Fold | None]:
    """(found, memory) of compaction `version`; version 0 is found, as no memory.

    The current memory answers for its own version; any other is the copy kept
    by version (one read), which its TTL may have taken.
    """
    if version == 0:
        return True, None
    if current is not None and current.version == version:
        return True, current
    kept = store.fold_at(key, version)
    return kept is not None, kept
