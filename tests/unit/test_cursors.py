"""The data listings' cursors: a place in one listing, refused anywhere else (400, `cursor`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.conversation_store import ContactsPosition, ConversationKey
from converse_history.cursors import (
    _issue,
    contacts_cursor,
    contacts_position,
    turns_cursor,
    turns_position,
)
from converse_history.errors import ApiError
from memory_core.turns import TurnPosition

KEY = ConversationKey("acme", "c1")
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
turn_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")
contact_ids = st.from_regex(r"\A[A-Za-z0-9+][A-Za-z0-9_.:@+-]{0,127}\Z")


def refused(read, *args) -> str:
    with pytest.raises(ApiError) as error:
        read(*args)
    assert error.value.status == 400
    message: str = error.value.body()["error"]["message"]
    assert message.startswith("cursor")
    return message


@given(sent=instants, late=st.timedeltas(timedelta(0), timedelta(days=3)), turn_id=turn_ids)
def test_a_turns_cursor_names_the_place_it_was_issued_for(sent, late, turn_id):
    place = TurnPosition(sent, sent + late, turn_id)
    assert turns_position(KEY, turns_cursor(KEY, place)) == place


@given(shard=st.integers(0, 15), contact=contact_ids)
def test_a_contacts_cursor_names_the_place_it_was_issued_for(shard, contact):
    place = ContactsPosition(shard, contact)
    assert contacts_position("acme", contacts_cursor("acme", place)) == place


def test_no_cursor_is_the_first_page():
    assert turns_position(KEY, None) is None
    assert contacts_position("acme", None) is None


@given(index=st.integers(0, 10_000), replacement=st.sampled_from("AZaz09-_.x"))
def test_a_cursor_edited_anywhere_is_refused(index, replacement):
    cursor = turns_cursor(
        KEY, TurnPosition(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC), "m-1")
    )
    at = index % len(cursor)
    edited = cursor[:at] + replacement + cursor[at + 1 :]
    if edited != cursor:
        refused(turns_position, KEY, edited)


@pytest.mark.parametrize(
    "other",
    [ConversationKey("acme", "c2"), ConversationKey("roomy", "c1"), ConversationKey("acme", "c1 ")],
)
def test_a_cursor_of_another_conversation_is_refused(other):
    instant = datetime(2026, 1, 1, tzinfo=UTC)
    cursor = turns_cursor(other, TurnPosition(instant, instant, "m-1"))
    refused(turns_position, KEY, cursor)


def test_a_cursor_of_the_other_listing_or_another_tenant_is_refused():
    contacts = contacts_cursor("acme", ContactsPosition(3, "c9"))
    refused(turns_position, KEY, contacts)
    refused(contacts_position, "roomy", contacts)
    instant = datetime(2026, 1, 1, tzinfo=UTC)
    refused(contacts_position, "acme", turns_cursor(KEY, TurnPosition(instant, instant, "m")))


@pytest.mark.parametrize("cursor", ["", ".", "garbage", "a.b.c", "x" * 2000, "é.é"])
def test_what_no_listing_issued_is_refused(cursor):
    refused(turns_position, KEY, cursor)
    refused(contacts_position, "acme", cursor)


@pytest.mark.parametrize(
    "place",
    [
        {"sent": "yesterday", "recorded": "2026-01-01T00:00:00Z", "id": "m"},
        {"sent": "2026-01-01T00:00:00", "recorded": "2026-01-01T00:00:00", "id": "m"},
        {"sent": "2026-01-01T00:00:00Z", "recorded": "2026-01-01T00:00:00Z", "id": "a b"},
        {"sent": "2026-01-01T00:00:00Z", "recorded": 5, "id": "m"},
        {"shard": 16, "contact": "c1"},
        {"shard": -1, "contact": "c1"},
        {"shard": "1", "contact": "c1"},
        {"shard": 1, "contact": "no spaces"},
        {},
    ],
)
def test_a_well_sealed_cursor_that_names_no_place_is_refused(place):
    # Sealed as the service would seal it: only its place is wrong.
    refused(turns_position, KEY, _issue(["turns", "acme", "c1"], place))
    refused(contacts_position, "acme", _issue(["contacts", "acme"], place))
