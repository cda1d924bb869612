"""`GET .../turns`: a contact's retained turns, oldest first, exactly as they were recorded.

Untrimmed, unrepaired, tool blocks whole, with the model's usage where one was
recorded: what an audit or a data-access request asks for, not what a window
serves. Folded turns and turns older than the tenant's `historyDays` are
included while retained; turns past their TTL or behind an erase never are.
"""

from __future__ import annotations

from typing import Any

from adapters.conversation_store import (
    ConversationData,
    ConversationKey,
    StoredTurn,
    format_instant,
)
from adapters.rules_source import RulesSource
from converse_history.access import Caller, tenant_for
from converse_history.cursors import turns_cursor, turns_position
from converse_history.errors import not_found


class TurnsExport:
    def __init__(self, *, store: ConversationData, rules: RulesSource) -> None:
        self._store = store
        self._rules = rules

    def page(
        self, tenant_id: str, contact_id: str, caller: Caller, *, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        tenant_for(self._rules, tenant_id, caller)
        key = ConversationKey(tenant_id, contact_id)
        after = turns_position(key, cursor)
        page = self._store.turns_page(key, after, limit)
        if after is None and not page.stored:
            raise not_found(f"nothing stored for contact {contact_id!r}")
        return {
            "turns": [exported(stored) for stored in page.turns],
            "nextCursor": turns_cursor(key, page.last) if page.last else None,
        }


def exported(stored: StoredTurn) -> dict[str, Any]:
    turn = stored.turn
    view: dict[str, Any] = {
        "id": turn.id,
        "role": turn.role,
        "sentAt": format_instant(turn.sent_at),
        "recordedAt": format_instant(turn.position.recorded_at),
        "content": [dict(block) for block in turn.content],
    }
    if turn.stated_sent_at is not None:
        view["statedSentAt"] = format_instant(turn.stated_sent_at)
    if stored.usage is not None:
        view["usage"] = stored.usage.as_json()
    return view
