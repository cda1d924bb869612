"""`GET /v1/tenants/{t}/contacts`: the tenant's contacts with anything stored, in pages."""

from __future__ import annotations

from typing import Any

from adapters.conversation_store import ConversationData, format_instant
from adapters.rules_source import RulesSource
from converse_history.access import Caller, tenant_for
from converse_history.cursors import contacts_cursor, contacts_position


class ContactsListing:
    def __init__(self, *, store: ConversationData, rules: RulesSource) -> None:
        self._store = store
        self._rules = rules

    def page(
        self, tenant_id: str, caller: Caller, *, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        tenant_for(self._rules, tenant_id, caller)
        page = self._store.contacts_page(tenant_id, contacts_position(tenant_id, cursor), limit)
        return {
            "contacts": [
                {
                    "contactId": entry.contact_id,
                    "lastMessageAt": (
                        format_instant(entry.last_message_at) if entry.last_message_at else None
                    ),
                }
                for entry in page.contacts
            ],
            "nextCursor": contacts_cursor(tenant_id, page.last) if page.last else None,
        }
