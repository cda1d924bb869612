"""The client's data calls: `turns()`, `contacts()` and `forget()`, over stand-ins for the service.

`ScriptedTransport` answers each call from a script and keeps the calls sent,
so paging, refusals, retries and the checks made before sending are seen
without a network. The two real transports are driven by stand-ins for what
they talk to (an HTTP session, a Lambda client): what they would send is
checked there, the SigV4 signature included, recomputed as the gateway would.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import botocore.session
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from conversation_memory_client import (
    ContactSummary,
    Erasure,
    ExportedTurn,
    Forbidden,
    InvalidRequest,
    MemoryClient,
    NotFound,
    ServiceUnavailable,
)
from conversation_memory_client.transports import Answer, Call, TransientFailure

TENANT = "acme-legal"
CONTACT = "c-42"
API_URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/"
API_ROOT = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/v1/tenants"
FUNCTION = "converse-history:live"


@dataclass
class ScriptedTransport:
    """Answers the script in order (an `Answer`, or a `TransientFailure` to raise); keeps
    every call sent."""

    script: list[Answer | TransientFailure]
    sent: list[Call] = field(default_factory=list)

    def send(self, call: Call) -> Answer:
        self.sent.append(call)
        step = self.script.pop(0)
        if isinstance(step, TransientFailure):
            raise step
        return step


def client_of(*script: Answer | TransientFailure) -> tuple[MemoryClient, ScriptedTransport]:
    transport = ScriptedTransport(list(script))
    return MemoryClient(transport, sleep=lambda _: None, jitter=lambda: 0.5), transport


def turn(number: int, **more: Any) -> dict[str, Any]:
    return {
        "id": f"m-{number}",
        "role": "user" if number % 2 else "assistant",
        "sentAt": f"2026-12-01T12:00:{number:02d}Z",
        "recordedAt": f"2026-12-01T12:00:{number:02d}.5Z",
        "content": [{"text": f"turn {number}"}],
        **more,
    }


def turns_page(numbers: Iterable[int], next_cursor: str | None) -> Answer:
    return Answer(200, {"turns": [turn(n) for n in numbers], "nextCursor": next_cursor})


def contacts_page(ids: Iterable[str], next_cursor: str | None) -> Answer:
    contacts = [{"contactId": i, "lastMessageAt": "2026-12-01T12:00:00Z"} for i in ids]
    return Answer(200, {"contacts": contacts, "nextCursor": next_cursor})


def refusal(status: int, code: str, message: str) -> Answer:
    return Answer(status, {"error": {"code": code, "message": message}})


ERASED = {"erased": {"items": 7, "complete": True}, "erasedAt": "2026-12-01T12:00:00Z"}
ERASING = {"erased": {"items": 25, "complete": False}, "erasedAt": "2026-12-01T12:00:00Z"}


# -- paging --------------------------------------------------------------------------------


def test_turns_follow_next_cursor_across_three_pages_and_stop_at_null():
    client, transport = client_of(
        turns_page([1, 2], "cursor-1"), turns_page([3, 4], "cursor-2"), turns_page([5], None)
    )

    exported = list(client.turns(TENANT, CONTACT, page_size=2))

    assert [t.id for t in exported] == ["m-1", "m-2", "m-3", "m-4", "m-5"]
    assert [(c.action, c.tenant_id, c.contact_id, c.query) for c in transport.sent] == [
        ("turns", TENANT, CONTACT, {"limit": 2}),
        ("turns", TENANT, CONTACT, {"limit": 2, "cursor": "cursor-1"}),
        ("turns", TENANT, CONTACT, {"limit": 2, "cursor": "cursor-2"}),
    ]
    assert all(c.body is None for c in transport.sent)


def test_an_exported_turn_is_typed_and_keeps_its_json():
    usage = {"inputTokens": 12, "outputTokens": 30, "totalTokens": 42}
    tool_use = [{"toolUse": {"toolUseId": "t-1", "name": "look_up", "input": {"item": "tea"}}}]
    with_usage = turn(2, usage=usage, content=tool_use)
    client, _ = client_of(Answer(200, {"turns": [turn(1), with_usage], "nextCursor": None}))

    first, second = client.turns(TENANT, CONTACT)

    assert first == ExportedTurn(
        id="m-1",
        role="user",
        sent_at="2026-12-01T12:00:01Z",
        recorded_at="2026-12-01T12:00:01.5Z",
        content=[{"text": "turn 1"}],
        usage=None,
        raw=turn(1),
    )
    assert (second.role, second.content, second.usage) == ("assistant", tool_use, usage)
    assert second.raw == with_usage


def test_contacts_follow_next_cursor_and_name_no_contact():
    client, transport = client_of(
        contacts_page(["a", "b"], "k1"),
        contacts_page(["c", "d"], "k2"),
        Answer(200, {"contacts": [{"contactId": "e", "lastMessageAt": None}], "nextCursor": None}),
    )

    listed = list(client.contacts(TENANT, page_size=2))

    assert [c.contact_id for c in listed] == ["a", "b", "c", "d", "e"]
    assert listed[0] == ContactSummary(
        contact_id="a",
        last_message_at="2026-12-01T12:00:00Z",
        raw={"contactId": "a", "lastMessageAt": "2026-12-01T12:00:00Z"},
    )
    assert listed[-1].last_message_at is None
    assert [(c.action, c.contact_id, c.query) for c in transport.sent] == [
        ("contacts", None, {"limit": 2}),
        ("contacts", None, {"limit": 2, "cursor": "k1"}),
        ("contacts", None, {"limit": 2, "cursor": "k2"}),
    ]


def test_pages_are_fetched_as_the_iteration_goes_on():
    client, transport = client_of(turns_page([1, 2], "cursor-1"), turns_page([3], None))

    exported = client.turns(TENANT, CONTACT, page_size=2)
    assert transport.sent == [], "nothing is sent until the iteration starts"
    next(exported)
    next(exported)
    assert len(transport.sent) == 1
    next(exported)
    assert len(transport.sent) == 2


def test_the_default_page_is_100_and_an_empty_listing_is_one_call():
    client, transport = client_of(contacts_page([], None))

    assert list(client.contacts(TENANT)) == []
    assert [c.query for c in transport.sent] == [{"limit": 100}]


@pytest.mark.parametrize("page_size", [0, 501, -1])
def test_a_page_size_out_of_range_is_refused_before_anything_is_sent(page_size: int):
    client, transport = client_of()

    with pytest.raises(ValueError, match="page_size"):
        client.turns(TENANT, CONTACT, page_size=page_size)
    with pytest.raises(ValueError, match="page_size"):
        client.contacts(TENANT, page_size=page_size)
    assert transport.sent == []


def test_page_sizes_of_1_and_500_are_sent_as_they_are():
    client, transport = client_of(turns_page([], None), contacts_page([], None))

    list(client.turns(TENANT, CONTACT, page_size=1))
    list(client.contacts(TENANT, page_size=500))

    assert [c.query for c in transport.sent] == [{"limit": 1}, {"limit": 500}]


# -- refusals and retries --------------------------------------------------------------------


def test_nothing_stored_for_the_contact_raises_not_found_on_the_first_iteration():
    client, _ = client_of(refusal(404, "not_found", "nothing is stored for this contact"))

    exported = client.turns(TENANT, CONTACT)
    with pytest.raises(NotFound) as raised:
        next(exported)
    assert (raised.value.status, raised.value.code) == (404, "not_found")


def test_a_caller_of_another_tenant_is_forbidden():
    client, transport = client_of(refusal(403, "forbidden", "not this tenant's caller"))

    with pytest.raises(Forbidden):
        list(client.contacts(TENANT))
    assert len(transport.sent) == 1, "a refusal is not retried"


def test_a_cursor_refused_midway_raises_invalid_request_after_the_pages_before_it():
    client, _ = client_of(
        turns_page([1, 2], "cursor-1"), refusal(400, "invalid_request", "cursor is not valid")
    )
    exported = client.turns(TENANT, CONTACT, page_size=2)

    assert [next(exported).id, next(exported).id] == ["m-1", "m-2"]
    with pytest.raises(InvalidRequest, match="cursor"):
        next(exported)


def test_a_page_that_failed_is_retried_with_the_same_cursor():
    client, transport = client_of(
        turns_page([1], "cursor-1"),
        refusal(503, "unavailable", "try again"),
        TransientFailure(503, "connection_failed", "reset"),
        turns_page([2], None),
    )

    assert [t.id for t in client.turns(TENANT, CONTACT, page_size=1)] == ["m-1", "m-2"]
    assert [c.query for c in transport.sent] == [
        {"limit": 1},
        {"limit": 1, "cursor": "cursor-1"},
        {"limit": 1, "cursor": "cursor-1"},
        {"limit": 1, "cursor": "cursor-1"},
    ]


def test_an_erase_is_retried_on_a_503_then_answers():
    client, transport = client_of(refusal(503, "unavailable", "try again"), Answer(200, ERASED))

    erasure = client.forget(TENANT, CONTACT)

    assert erasure == Erasure(items=7, complete=True, erased_at="2026-12-01T12:00:00Z", raw=ERASED)
    assert [(c.action, c.contact_id, c.body, c.query) for c in transport.sent] == [
        ("erase", CONTACT, None, None),
        ("erase", CONTACT, None, None),
    ]


def test_failures_on_every_attempt_raise_service_unavailable():
    client, transport = client_of(*[refusal(503, "unavailable", "down")] * 4)

    with pytest.raises(ServiceUnavailable):
        client.forget(TENANT, CONTACT)
    assert len(transport.sent) == 4


# -- forget ----------------------------------------------------------------------------------


def test_an_erase_answered_202_continues_asynchronously():
    client, _ = client_of(Answer(202, ERASING))

    erasure = client.forget(TENANT, CONTACT)

    assert (erasure.items, erasure.complete) == (25, False)


def test_a_202_is_incomplete_even_when_its_body_does_not_say():
    body = {"erased": {"items": 25}, "erasedAt": "2026-12-01T12:00:00Z"}
    client, _ = client_of(Answer(202, body))

    assert client.forget(TENANT, CONTACT).complete is False


def test_erasing_a_contact_with_nothing_stored_is_zero_items():
    nothing = {"erased": {"items": 0, "complete": True}, "erasedAt": "2026-12-01T12:00:00Z"}
    client, _ = client_of(Answer(200, nothing))

    erasure = client.forget(TENANT, "never-seen")

    assert (erasure.items, erasure.complete) == (0, True)


def test_a_call_names_a_contact_unless_it_lists_the_tenants_contacts():
    with pytest.raises(ValueError, match="takes no contact id"):
        Call("contacts", TENANT, CONTACT)
    for action in ("turns", "erase", "converse", "record", "memory"):
        with pytest.raises(ValueError, match="needs a contact id"):
            Call(action, TENANT)


# -- over HTTP -------------------------------------------------------------------------------


@dataclass
class CannedResponse:
    status_code: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordingHttpSession:
    """Stands in for botocore's `URLLib3Session`: keeps each prepared request, answers the
    canned responses in order."""

    responses: list[CannedResponse]
    sent: list[Any] = field(default_factory=list)

    def send(self, request: Any) -> CannedResponse:
        self.sent.append(request)
        return self.responses.pop(0)


def json_response(status: int, body: Any) -> CannedResponse:
    return CannedResponse(status, json.dumps(body).encode("utf-8"))


def signing_session() -> botocore.session.Session:
    session = botocore.session.Session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    return session


def over_http(*responses: CannedResponse) -> tuple[MemoryClient, RecordingHttpSession]:
    http_session = RecordingHttpSession(list(responses))
    client = MemoryClient.over_http(
        API_URL, session=signing_session(), http_session=http_session, sleep=lambda _: None
    )
    return client, http_session


def signature_the_gateway_computes(sent: Any) -> str:
    """The request's SigV4 signature recomputed from what the gateway sees: the path, the
    query parameters decoded (canonicalized afresh, not as sent), the signed headers."""
    authorization = dict(
        part.strip().split("=", 1)
        for part in sent.headers["Authorization"].split(" ", 1)[1].split(",")
    )
    url = urlsplit(sent.url)
    received = AWSRequest(
        method=sent.method,
        url=f"{url.scheme}://{url.netloc}{url.path}",
        params=parse_qsl(url.query, keep_blank_values=True),
        headers={
            name: sent.headers[name]
            for name in authorization["SignedHeaders"].split(";")
            if name != "host"
        },
        data=sent.body,
    )
    received.context["timestamp"] = sent.headers["X-Amz-Date"]
    credentials = signing_session().get_credentials().get_frozen_credentials()
    signer = SigV4Auth(credentials, "execute-api", "eu-west-1")
    string_to_sign = signer.string_to_sign(received, signer.canonical_request(received))
    return str(signer.signature(string_to_sign, received))


def signature_sent(sent: Any) -> str:
    return str(sent.headers["Authorization"].rsplit("Signature=", 1)[1])


def test_turns_over_http_are_gets_with_the_limit_and_the_cursor_in_the_query():
    cursor = "eyJrIjoiYStiL2M9In0=/+ z"  # base64's `+/=`, and a space, all percent-encoded
    client, http_session = over_http(
        json_response(200, {"turns": [turn(1)], "nextCursor": cursor}),
        json_response(200, {"turns": [turn(2)], "nextCursor": None}),
    )

    exported = list(client.turns(TENANT, "alice+1@example.com", page_size=1))

    assert [t.id for t in exported] == ["m-1", "m-2"]
    first, second = http_session.sent
    contact_turns = f"{API_ROOT}/{TENANT}/contacts/alice%2B1%40example.com/turns"
    assert (first.method, first.url) == ("GET", f"{contact_turns}?limit=1")
    assert (second.method, second.url) == (
        "GET",
        f"{contact_turns}?limit=1&cursor=eyJrIjoiYStiL2M9In0%3D%2F%2B%20z",
    )
    assert dict(parse_qsl(urlsplit(second.url).query)) == {"limit": "1", "cursor": cursor}
    assert (first.body, second.body) == (None, None)


def test_the_signature_covers_the_query_as_the_gateway_reads_it():
    cursor = "a+b/c= d~é"
    client, http_session = over_http(
        json_response(200, {"contacts": [], "nextCursor": cursor}),
        json_response(200, {"contacts": [], "nextCursor": None}),
    )

    list(client.contacts(TENANT, page_size=5))

    for sent in http_session.sent:
        assert signature_sent(sent) == signature_the_gateway_computes(sent)
    first, second = http_session.sent
    assert signature_sent(first) != signature_sent(second)


def test_contacts_over_http_are_a_get_on_the_tenants_contacts():
    client, http_session = over_http(
        json_response(
            200, {"contacts": [{"contactId": "c-1", "lastMessageAt": None}], "nextCursor": None}
        )
    )

    (listed,) = client.contacts(TENANT)

    assert listed.contact_id == "c-1"
    (sent,) = http_session.sent
    assert (sent.method, sent.url) == ("GET", f"{API_ROOT}/{TENANT}/contacts?limit=100")


def test_forget_over_http_is_a_delete_on_the_contact_and_a_202_is_incomplete():
    client, http_session = over_http(json_response(202, ERASING))

    erasure = client.forget(TENANT, "alice/bob")

    assert (erasure.items, erasure.complete) == (25, False)
    (sent,) = http_session.sent
    assert (sent.method, sent.url) == ("DELETE", f"{API_ROOT}/{TENANT}/contacts/alice%2Fbob")
    assert sent.body is None
    assert "Content-Type" not in sent.headers
    assert signature_sent(sent) == signature_the_gateway_computes(sent)


def test_refusals_over_http_raise_their_exceptions():
    client, _ = over_http(
        json_response(404, {"error": {"code": "not_found", "message": "nothing stored"}}),
        json_response(403, {"error": {"code": "forbidden", "message": "another tenant"}}),
        json_response(400, {"error": {"code": "invalid_request", "message": "cursor: not ours"}}),
    )

    with pytest.raises(NotFound):
        list(client.turns(TENANT, CONTACT))
    with pytest.raises(Forbidden):
        list(client.contacts(TENANT))
    with pytest.raises(InvalidRequest, match="cursor"):
        list(client.contacts(TENANT))


def test_the_routes_before_these_are_unchanged_over_http():
    client, http_session = over_http(
        json_response(200, {"decision": "escalate", "reason": "rule", "turnCount": 1}),
        json_response(200, {"turn": {"id": "m-2", "role": "assistant"}}),
        json_response(200, {"counters": {}}),
    )

    client.converse(TENANT, CONTACT, "Hello", message_id="m-1")
    client.record(TENANT, CONTACT, role="assistant", text="Hi", message_id="m-2")
    client.memory(TENANT, CONTACT)

    contact = f"{API_ROOT}/{TENANT}/contacts/{CONTACT}"
    assert [(s.method, s.url) for s in http_session.sent] == [
        ("POST", f"{contact}/converse"),
        ("POST", f"{contact}/turns"),
        ("GET", f"{contact}/memory"),
    ]


# -- over Lambda -----------------------------------------------------------------------------


@dataclass
class RecordingLambda:
    """Stands in for botocore's Lambda client: keeps each event, answers the payloads in order."""

    payloads: list[Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, *, FunctionName: str, Payload: bytes) -> dict[str, Any]:
        assert FunctionName == FUNCTION
        self.events.append(json.loads(Payload))
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(self.payloads.pop(0)).encode())}


def over_lambda(*payloads: Any) -> tuple[MemoryClient, RecordingLambda]:
    stand_in = RecordingLambda(list(payloads))
    client = MemoryClient.over_lambda(FUNCTION, lambda_client=stand_in, sleep=lambda _: None)
    return client, stand_in


def test_turns_over_lambda_send_the_limit_and_the_cursor_in_the_event():
    client, stand_in = over_lambda(
        {"turns": [turn(1)], "nextCursor": "cursor-1"}, {"turns": [], "nextCursor": None}
    )

    assert [t.id for t in client.turns(TENANT, CONTACT, page_size=3)] == ["m-1"]
    assert stand_in.events == [
        {"action": "turns", "tenantId": TENANT, "contactId": CONTACT, "limit": 3},
        {
            "action": "turns",
            "tenantId": TENANT,
            "contactId": CONTACT,
            "limit": 3,
            "cursor": "cursor-1",
        },
    ]


def test_contacts_over_lambda_send_no_contact_id():
    client, stand_in = over_lambda(
        {"contacts": [{"contactId": "c-1", "lastMessageAt": None}], "nextCursor": "k1"},
        {"contacts": [], "nextCursor": None},
    )

    assert [c.contact_id for c in client.contacts(TENANT)] == ["c-1"]
    assert stand_in.events == [
        {"action": "contacts", "tenantId": TENANT, "limit": 100},
        {"action": "contacts", "tenantId": TENANT, "limit": 100, "cursor": "k1"},
    ]


def test_forget_over_lambda_sends_an_erase_event_and_reads_complete_from_the_body():
    client, stand_in = over_lambda(ERASING, ERASED)

    continuing = client.forget(TENANT, CONTACT)
    done = client.forget(TENANT, CONTACT)

    assert (continuing.complete, done.complete) == (False, True)
    assert stand_in.events == [{"action": "erase", "tenantId": TENANT, "contactId": CONTACT}] * 2


def test_a_refusal_over_lambda_raises_its_exception():
    not_found = {"error": {"code": "not_found", "message": "nothing stored"}, "statusCode": 404}
    client, _ = over_lambda(not_found)

    with pytest.raises(NotFound):
        list(client.turns(TENANT, CONTACT))
