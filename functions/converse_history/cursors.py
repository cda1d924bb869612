"""The opaque cursors of the data listings: where a page stopped, and which listing it is of.

A cursor names a place in one listing (one contact's turns, or one tenant's
contacts), base64url-encoded with a check digest over the listing and the
place. One that does not decode, whose digest does not match (edited), or that
was issued for another listing (another contact's or tenant's) is refused
400 naming `cursor`. It is not a secret: all it can name is a place in the
caller's own listing, which the route scopes by the path whatever it says.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from datetime import datetime
from typing import Any

from adapters.contacts_index import CONTACTS_SHARDS
from adapters.conversation_store import ContactsPosition, ConversationKey, format_instant
from converse_history.api_models import CONTACT_ID_PATTERN, MESSAGE_ID_PATTERN
from converse_history.errors import ApiError, invalid
from memory_core.turns import TurnPosition

DIGEST_CHARS = 16
MAX_CURSOR_CHARS = 1024


def turns_cursor(key: ConversationKey, position: TurnPosition) -> str:
    place = {
        "sent": format_instant(position.sent_at),
        "recorded": format_instant(position.recorded_at),
        "id": position.turn_id,
    }
    return _issue(_turns_listing(key), place)


def turns_position(key: ConversationKey, cursor: str | None) -> TurnPosition | None:
    """The place a turns cursor names; None for no cursor (the first page)."""
    if cursor is None:
        return None
    place = _read(_turns_listing(key), cursor)
    try:
        sent, recorded, turn_id = place["sent"], place["recorded"], place["id"]
        position = TurnPosition(_instant(sent), _instant(recorded), turn_id)
    except (KeyError, TypeError, ValueError):
        raise _refused("it names no turn") from None
    if not isinstance(turn_id, str) or not re.fullmatch(MESSAGE_ID_PATTERN, turn_id):
        raise _refused("it names no turn")
    return position


def contacts_cursor(tenant_id: str, position: ContactsPosition) -> str:
    return _issue(
        _contacts_listing(tenant_id), {"shard": position.shard, "contact": position.contact_id}
    )


def contacts_position(tenant_id: str, cursor: str | None) -> ContactsPosition | None:
    if cursor is None:
        return None
    place = _read(_contacts_listing(tenant_id), cursor)
    shard, contact = place.get("shard"), place.get("contact")
    if (
        not isinstance(shard, int)
        or not 0 <= shard < CONTACTS_SHARDS
        or not isinstance(contact, str)
        or not re.fullmatch(CONTACT_ID_PATTERN, contact)
    ):
        raise _refused("it names no contact")
    return ContactsPosition(shard, contact)


def _turns_listing(key: ConversationKey) -> list[str]:
    return ["turns", key.tenant_id, key.contact_id]


def _contacts_listing(tenant_id: str) -> list[str]:
    return ["contacts", tenant_id]


def _issue(listing: list[str], place: dict[str, Any]) -> str:
    payload = json.dumps({"place": place}, separators=(",", ":"), sort_keys=True)
    body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
    return f"{body}.{_digest(listing, body)}"


def _read(listing: list[str], cursor: str) -> dict[str, Any]:
    body, dot, digest = cursor.partition(".")
    if len(cursor) > MAX_CURSOR_CHARS or not dot or digest != _digest(listing, body):
        raise _refused("it was not issued for this listing")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _refused("it does not decode") from None
    place = decoded.get("place") if isinstance(decoded, dict) else None
    if not isinstance(place, dict):
        raise _refused("it names no place")
    return place


def _digest(listing: list[str], body: str) -> str:
    scoped = json.dumps([listing, body], separators=(",", ":"))
    return hashlib.sha256(scoped.encode()).hexdigest()[:DIGEST_CHARS]


def _instant(text: object) -> datetime:
    if not isinstance(text, str):
        raise TypeError(text)
    instant = datetime.fromisoformat(text)
    if instant.tzinfo is None:
        raise ValueError(text)
    return instant


def _refused(reason: str) -> ApiError:
    return invalid("cursor", f"not a cursor of this listing ({reason}); start without one")
