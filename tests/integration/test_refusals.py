"""Bad input gets a clear 4xx with the field named, and nothing is written."""

from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.conftest import minutes_ago

CONVERSE = "/v1/tenants/acme/contacts/c1/converse"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "message"),
        ({"message": {}}, "message"),
        ({"message": {"text": ""}}, "message"),
        ({"message": {"text": "   "}}, "message"),
        ({"message": {"text": "hi", "content": [{"text": "hi"}]}}, "message"),
        ({"message": {"text": 12}}, "message.text"),
        ({"message": {"text": "hi", "sentAt": "yesterday"}}, "message.sentAt"),
        ({"message": {"text": "hi", "sentAt": "2026-11-02T10:00:00"}}, "message.sentAt"),
        ({"message": {"text": "hi", "id": "has spaces"}}, "message.id"),
        ({"message": {"text": "hi", "id": "x" * 129}}, "message.id"),
        ({"message": {"text": "hi", "colour": "red"}}, "message.colour"),
        ({"message": {"content": []}}, "message.content"),
        ({"message": {"content": [{"image": {}}]}}, "message.content"),
        ({"message": {"content": [{"text": "x"}] * 51}}, "message.content"),
        (
            {"message": {"content": [{"toolUse": {"toolUseId": "t", "name": "n", "input": {}}}]}},
            "message",
        ),
    ],
)
def test_an_invalid_body_is_refused_with_400_naming_the_field(api, body, field):
    status, answer = api.request("POST", CONVERSE, body)
    assert status == 400
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith(f"{field}")
    assert api.items() == []


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"text"'])
def test_a_body_that_is_not_a_json_object_is_refused(api, raw):
    status, answer = api.request("POST", CONVERSE, raw)
    assert status == 400
    assert "error" in answer
    assert api.items() == []


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/tenants/a%20b/contacts/c1/converse", "tenantId"),
        ("/v1/tenants/acme/contacts/c!1/converse", "contactId"),
        ("/v1/tenants/" + "t" * 65 + "/contacts/c1/converse", "tenantId"),
    ],
)
def test_bad_ids_in_the_path_are_refused(api, path, field):
    status, answer = api.request("POST", path, {"message": {"text": "hi"}})
    assert status == 400
    assert answer["error"]["message"].startswith(field)
    assert api.items() == []


def test_an_unknown_tenant_is_404_and_nothing_is_written(api):
    status, answer = api.converse("hello", tenant="nobody")
    assert status == 404
    assert answer["error"]["code"] == "unknown_tenant"
    assert api.items() == []


def test_a_sent_at_more_than_five_minutes_ahead_is_refused(api):
    ahead = datetime.now(UTC) + timedelta(minutes=6)
    status, answer = api.converse("from the future", sent_at=ahead)
    assert status == 422
    assert answer["error"]["message"].startswith("message.sentAt")
    assert api.items() == []
    status, _ = api.converse("nearly now", sent_at=datetime.now(UTC) + timedelta(minutes=4))
    assert status == 200


def test_a_message_over_the_item_limit_is_413_before_anything_is_written(api):
    status, answer = api.converse("x" * 420_000)
    assert status == 413
    assert answer["error"]["code"] == "message_too_large"
    assert api.items() == []


def test_a_message_just_under_the_limit_is_recorded(api):
    status, _ = api.converse("x" * 390_000)
    assert status == 200


def test_past_the_rate_limit_the_message_is_429_and_not_recorded(api):
    start = minutes_ago(5)
    for n in range(3):
        status, _ = api.converse(f"m{n}", tenant="limited", sent_at=start + timedelta(seconds=n))
        assert status == 200
    status, answer = api.converse("m3", tenant="limited", sent_at=start + timedelta(seconds=10))
    assert status == 429
    assert answer["error"]["code"] == "rate_limited"
    assert len(api.turn_items()) == 3
    # The limit counts arrivals: a later `sentAt` does not make room.
    status, _ = api.converse("m4", tenant="limited", sent_at=start + timedelta(seconds=61))
    assert status == 429


def test_a_retry_of_a_recorded_message_is_answered_even_past_the_rate_limit(api):
    start = minutes_ago(5)
    for n in range(3):
        api.converse(
            f"m{n}", tenant="limited", message_id=f"id-{n}", sent_at=start + timedelta(seconds=n)
        )
    status, body = api.converse(
        "m2", tenant="limited", message_id="id-2", sent_at=start + timedelta(seconds=2)
    )
    assert (status, body["turnCount"]) == (200, 3)


def test_a_reply_with_a_bad_role_or_content_is_refused(api):
    turns = "/v1/tenants/acme/contacts/c1/turns"
    assert api.request("POST", turns, {"role": "system", "text": "x"})[0] == 400
    status, answer = api.request("POST", turns, {"role": "user", "text": "I am the contact"})
    assert status == 400
    assert "converse" in answer["error"]["message"]
    assert api.items() == []


def test_memory_of_a_conversation_never_recorded_is_404(api):
    status, answer = api.request("GET", "/v1/tenants/acme/contacts/nobody/memory")
    assert status == 404
    assert answer["error"]["code"] == "not_found"


def test_an_unknown_route_answers_the_same_error_shape(api):
    status, answer = api.request("GET", "/v1/nothing/here")
    assert status == 404
    assert answer["error"]["code"] == "not_found"


def test_a_body_that_is_not_json_is_named_as_such(api):
    status, answer = api.request("POST", CONVERSE, "{not json")
    assert status == 400
    assert answer["error"]["message"] == "body: not valid JSON"
