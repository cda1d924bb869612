"""`POST .../recall`: a contact's older turns found by their words, each cut around its match.

What is ranked is every retained turn of the history range (`historyDays`
back from now), the erased ones left out: the folded turns from recall's index
(`memory_core.recall_index`), the unfolded and late ones read whole. Only the
best are then read (`turns_at`) and cut (`memory_core.recall.passage`) within
`HISTORY_MESSAGE_MAX_TOKENS`. Nothing is recorded: the contact's rate limit
is checked, as its next message's would be, but a recall does not count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.conversation_store import ConversationKey, ConversationStore
from adapters.rules_source import RulesSource
from converse_history.access import Caller, tenant_for
from converse_history.answers import rate_limited, turn_view
from memory_core.conversation import LateTurn
from memory_core.erasure import erased
from memory_core.history_range import history_cutoff
from memory_core.rate_limit import seconds_until_free
from memory_core.recall_index import Found, Segment, search
from memory_core.settings import Settings
from memory_core.turns import Turn, TurnPosition

RESERVE = 5
"""Turns ranked beyond the limit, in case some were deleted since they were indexed."""
MAX_UNINDEXED_TURNS = 2000
"""Unfolded turns read whole, oldest first: more wait on a compaction that fell behind,
and the newest of them are in the window anyway."""


class RecallIndexReader(Protocol):
    def live_segments(self, key: ConversationKey) -> list[Segment]: ...


class RecallStore(ConversationStore, RecallIndexReader, Protocol):
    """The state and the turns, and recall's index beside them."""


class RecallSearch:
    def __init__(
        self,
        *,
        store: RecallStore,
        rules: RulesSource,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._rules = rules
        self._settings = settings
        self._clock = clock

    def recall(
        self, tenant_id: str, contact_id: str, caller: Caller, *, query: str, limit: int
    ) -> dict[str, Any]:
        # Imported here: the converse Lambda's cold start need not load recall's terms.
        from memory_core.recall import passage  # noqa: PLC0415

        tenant = tenant_for(self._rules, tenant_id, caller)
        key = ConversationKey(tenant_id, contact_id)
        now = datetime.fromtimestamp(self._clock(), UTC)
        state = self._store.state(key)
        if state is None:
            return {"passages": []}  # nothing stored: nothing found
        wait = seconds_until_free(state.recent_contact, now, tenant.rate_limit)
        if wait:
            raise rate_limited(wait)
        since = history_cutoff(now, tenant.history_days)

        def searched(position: TurnPosition) -> bool:
            return position.sent_at >= since and not erased(position, state.erased_at)

        unindexed = self._unindexed(key, state.watermark, state.late_turns, state.erased_at)
        segments = self._store.live_segments(key)
        # Ranked a few more than asked: a turn deleted since it was indexed (its TTL
        # passed, a rare race) is passed over for the next.
        found = search(query, segments, unindexed, searched, limit + RESERVE)
        turns = self._read(key, found[:limit], unindexed)
        if any(f.position not in turns for f in found[:limit]):
            turns |= self._read(key, found[limit:], unindexed)
        budget = self._settings.history_message_max_tokens
        passages = [
            {"turn": turn_view(passage(turns[f.position], query, budget)), "score": f.score}
            for f in found
            if f.position in turns
        ]
        return {"passages": passages[:limit]}

    def _unindexed(
        self,
        key: ConversationKey,
        watermark: TurnPosition | None,
        late: Sequence[LateTurn],
        erased_at: datetime | None,
    ) -> list[Turn]:
        """The turns no segment holds yet: those past the watermark, and the late ones."""
        newer = self._store.unfolded_turns(key, watermark, MAX_UNINDEXED_TURNS, erased_at=erased_at)
        waiting = self._store.turns_at(key, [entry.position for entry in late]) if late else []
        return [stored.turn for stored in [*newer, *waiting] if not stored.expired]

    def _read(
        self, key: ConversationKey, found: Sequence[Found], unindexed: Sequence[Turn]
    ) -> dict[TurnPosition, Turn]:
        """The found turns, whole: the unindexed ones as read, the others read now."""
        whole = {turn.position: turn for turn in unindexed}
        wanted = [f.position for f in found if f.position not in whole]
        if wanted:
            whole |= {
                stored.turn.position: stored.turn
                for stored in self._store.turns_at(key, wanted)
                if not stored.expired
            }
        return whole
