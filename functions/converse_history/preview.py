"""`GET .../window`: the next converse call's window, previewed, and where every turn stands.

The window is chosen as the next converse would choose it (`next_window`), for
a message arriving now: the same history, memory and fragment, its cache
points included, without the message itself (the fragment is built around a
stand-in text, which is then taken out). Nothing is recorded: the rate limit,
the turn cap and the compaction trigger see no call. Beside it, every retained
turn (what the export lists) gets its one standing (`memory_core.standing`):
in the window, trimmed, folded, out of range, or held by neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.conversation_store import (
    ConversationData,
    ConversationKey,
    ConversationStore,
    format_instant,
)
from adapters.rules_source import RulesSource
from converse_history.access import Caller, tenant_for
from converse_history.answers import memory_view, window_answer
from converse_history.errors import not_found
from converse_history.next_window import choose_window, snapshot_page_size
from memory_core.history_range import history_cutoff
from memory_core.settings import Settings
from memory_core.standing import ServedMemory, counts, standings
from memory_core.turns import Turn

PREVIEW_TURN_ID = chr(0x10FFFF)
"""The next message's id: it sorts after any turn recorded at the same instant, so the
preview reads every turn recorded up to now."""

NEXT_MESSAGE_STAND_IN = "the contact's next message"
"""The text the fragment is built around and then left without: the cache point after the
history goes where a text message from the contact would put it."""

TURNS_PAGE = 500
"""Turns read a request when listing the retained ones for their standings."""


class PreviewStore(ConversationStore, ConversationData, Protocol):
    """The window's reads and the export's."""


class WindowPreview:
    def __init__(
        self,
        *,
        store: PreviewStore,
        rules: RulesSource,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._rules = rules
        self._settings = settings
        self._clock = clock

    def preview(self, tenant_id: str, contact_id: str, caller: Caller) -> dict[str, Any]:
        tenant = tenant_for(self._rules, tenant_id, caller)
        key = ConversationKey(tenant_id, contact_id)
        now = datetime.fromtimestamp(self._clock(), UTC)
        since = history_cutoff(now, tenant.history_days)
        next_message = Turn(PREVIEW_TURN_ID, "user", [{"text": NEXT_MESSAGE_STAND_IN}], now, now)
        page = snapshot_page_size(self._settings)
        snapshot = self._store.snapshot(key, since, next_message.position, page)
        state = snapshot.state
        retained, stored = self._retained(key)
        if not stored:
            raise not_found(f"nothing stored for contact {contact_id!r}")
        chosen = choose_window(
            self._store,
            key,
            state,
            snapshot.newest_first,
            tenant=tenant,
            limits=self._settings.window_limits,
            since=since,
            turn=next_message,
        )
        answer, _ = window_answer(
            state.streak.count, next_message, chosen.window, chosen.memory, tenant=tenant
        )
        served = None
        if chosen.memory is not None and chosen.covered_to is not None:
            late = frozenset(entry.position for entry in state.late_turns)
            served = ServedMemory(chosen.covered_to, late)
        found = standings(
            retained,
            chosen.window.turns,
            chosen.window.trimmed_turns,
            memory=served,
            since=since,
        )
        memory = memory_view(chosen.memory)
        if memory is not None and chosen.memory is not None:
            memory["version"] = chosen.memory.version
        return {
            "previewedAt": format_instant(now),
            "historyRange": {"historyDays": tenant.history_days, "since": format_instant(since)},
            "history": answer["history"],
            "memory": memory,
            "window": answer["window"],
            "converse": without_next_message(answer["converse"]),
            "standings": {
                turn_id: _standing_view(standing.standing, standing.omitted_tokens)
                for turn_id, standing in found.items()
            },
            "counts": counts(found),
        }

    def _retained(self, key: ConversationKey) -> tuple[list[Turn], bool]:
        """Every retained turn, oldest first (what the export lists), and whether anything
        is stored for the contact (the export's 404 where not)."""
        page = self._store.turns_page(key, None, TURNS_PAGE)
        stored = page.stored
        turns = [entry.turn for entry in page.turns]
        while page.last is not None:
            page = self._store.turns_page(key, page.last, TURNS_PAGE)
            turns += [entry.turn for entry in page.turns]
        return turns, stored


def without_next_message(fragment: dict[str, Any]) -> dict[str, Any]:
    """The fragment without the stand-in's text: it is the last block of the last message
    (merged into the history's last `user` message, or a message of its own)."""
    messages = list(fragment["messages"])
    if not messages or messages[-1]["content"][-1:] != [{"text": NEXT_MESSAGE_STAND_IN}]:
        return fragment
    last = messages.pop()
    if len(last["content"]) > 1:
        messages.append({**last, "content": last["content"][:-1]})
    return {**fragment, "messages": messages}


def _standing_view(standing: str, omitted_tokens: int) -> dict[str, Any]:
    if standing == "trimmed":
        return {"standing": standing, "omittedTokens": omitted_tokens}
    return {"standing": standing}
