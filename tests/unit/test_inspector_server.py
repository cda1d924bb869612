"""`python -m inspector`: loopback only, reads only, the page's three reads sent on through the
client's transport (a fake here, recording what it is asked), the static files and nothing
beside them."""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Iterator

import pytest

from conversation_memory_client.transports import Answer, Call, TransientFailure
from inspector.__main__ import main
from inspector.pages import STATIC_DIR
from inspector.server import InspectorServer, NotLoopback, forwarded_call, loopback_address

API_URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
CONTACTS = {"contacts": [{"contactId": "alice", "lastMessageAt": None}], "nextCursor": None}


class RecordingTransport:
    """Answers every call with the next scripted answer (or 200 CONTACTS); keeps the calls."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.answers: list[Answer | Exception] = []

    def send(self, call: Call) -> Answer:
        self.calls.append(call)
        scripted = self.answers.pop(0) if self.answers else Answer(200, CONTACTS)
        if isinstance(scripted, Exception):
            raise scripted
        return scripted


@pytest.fixture
def transport() -> RecordingTransport:
    return RecordingTransport()


@pytest.fixture
def server(transport: RecordingTransport) -> Iterator[InspectorServer]:
    running = InspectorServer(("127.0.0.1", 0), transport)
    serving = threading.Thread(target=running.serve_forever, daemon=True)
    serving.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
        serving.join()


def request(
    server: InspectorServer, method: str, target: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """The raw target is sent as written: http.client normalises no `..` nor `%2F`."""
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(f"{host!s}", port, timeout=10)
    try:
        connection.request(method, target, body=body)
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        connection.close()


# -- loopback only -----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.com"])
def test_a_host_others_could_reach_is_refused(host):
    with pytest.raises(NotLoopback):
        loopback_address(host)
    with pytest.raises(NotLoopback):
        InspectorServer((host, 0), RecordingTransport())


@pytest.mark.parametrize(
    ("host", "bound"), [("127.0.0.1", "127.0.0.1"), ("localhost", "127.0.0.1"), ("::1", "::1")]
)
def test_a_loopback_host_is_accepted(host, bound):
    assert loopback_address(host) == bound


def test_the_command_exits_non_zero_for_a_public_host_before_reading_any_aws_configuration(
    capsys, monkeypatch
):
    # A profile that does not exist would fail any read of the configuration: none happens.
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile-anywhere")
    status = main(["--api-url", API_URL, "--host", "0.0.0.0", "--port", "0"])

    assert status != 0
    message = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0" in message
    assert "loopback" in message


# -- reads only --------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"])
@pytest.mark.parametrize(
    "target",
    [
        "/v1/tenants/demo/contacts/alice/converse",
        "/v1/tenants/demo/contacts/alice",
        "/v1/tenants/demo/contacts/alice/turns",
        "/inspect",
    ],
)
def test_any_method_but_get_and_head_is_405_and_sends_nothing_on(server, transport, method, target):
    body = b'{"message": {"text": "hi"}}'
    status, headers, payload = request(server, method, target, body)

    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert json.loads(payload)["error"]["code"] == "method_not_allowed"
    assert transport.calls == []


@pytest.mark.parametrize(
    "target",
    [
        "/v1/tenants/demo/contacts/alice/memory",
        "/v1/tenants/demo/contacts/alice/converse",
        "/v1/tenants/demo/contacts/alice",
        "/v1/tenants/demo",
        "/health",
        "/openapi.json",
        "/v1/tenants/demo/contacts/alice/turns/extra",
    ],
)
def test_a_get_the_page_never_makes_is_404_and_sends_nothing_on(server, transport, target):
    status, _, payload = request(server, "GET", target)

    assert status == 404
    assert json.loads(payload)["error"]["code"] == "not_found"
    assert transport.calls == []


# -- the three reads, sent on ------------------------------------------------------------------


def test_the_contacts_listing_is_sent_on_with_its_page_and_nothing_else(server, transport):
    status, headers, payload = request(
        server, "GET", "/v1/tenants/demo/contacts?limit=100&cursor=abc%3D&sneaky=1"
    )

    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(payload) == CONTACTS
    assert transport.calls == [
        Call("contacts", "demo", None, query={"limit": "100", "cursor": "abc="})
    ]


def test_the_turns_and_the_window_are_sent_on_with_the_ids_decoded(server, transport):
    turns: dict[str, object] = {"turns": [], "nextCursor": None}
    window: dict[str, object] = {"standings": {}, "counts": {}}
    transport.answers = [Answer(200, turns), Answer(200, window)]

    turns_status, _, turns_payload = request(
        server, "GET", "/v1/tenants/demo/contacts/alice%40example.com/turns?limit=100"
    )
    window_status, _, window_payload = request(
        server, "GET", "/v1/tenants/demo/contacts/%2B33612345678/window"
    )

    assert (turns_status, json.loads(turns_payload)) == (200, turns)
    assert (window_status, json.loads(window_payload)) == (200, window)
    assert transport.calls == [
        Call("turns", "demo", "alice@example.com", query={"limit": "100"}),
        Call("window", "demo", "+33612345678"),
    ]


def test_the_apis_refusal_reaches_the_page_as_it_was_answered(server, transport):
    refusal = {"error": {"code": "unknown_tenant", "message": "no tenant 'nope'"}}
    transport.answers = [Answer(404, refusal)]

    status, _, payload = request(server, "GET", "/v1/tenants/nope/contacts")

    assert (status, json.loads(payload)) == (404, refusal)


def test_a_failed_connection_is_502_in_the_error_shape(server, transport):
    transport.answers = [TransientFailure(503, "connection_failed", "no route to host")]

    status, _, payload = request(server, "GET", "/v1/tenants/demo/contacts/alice/window")

    assert status == 502
    assert json.loads(payload)["error"] == {
        "code": "connection_failed",
        "message": "no route to host",
    }


def test_a_head_is_answered_without_a_body(server, transport):
    status, headers, payload = request(server, "HEAD", "/v1/tenants/demo/contacts")

    assert status == 200
    assert payload == b""
    assert int(headers["Content-Length"]) == len(json.dumps(CONTACTS))


@pytest.mark.parametrize(
    ("path", "query", "expected"),
    [
        ("/v1/tenants/t/contacts", "", ("contacts", "t", None, None)),
        ("/v1/tenants/t/contacts/c/turns", "cursor=x&x=1", ("turns", "t", "c", {"cursor": "x"})),
        ("/v1/tenants/t/contacts/c/window", "limit=3", ("window", "t", "c", None)),
        ("/v1/tenants/t/contacts/c/memory", "", None),
        ("/v1/tenants/t/contacts/c/turns/", "", None),
        ("/v1/tenants/t/contacts/c%2Fd/window", "", ("window", "t", "c/d", None)),
    ],
)
def test_which_reads_are_sent_on(path, query, expected):
    """Only a listing takes a page; an id's encoded `/` stays in the id (the transport
    encodes it again as one path segment)."""
    found = forwarded_call(path, query)

    shown = found and (found.action, found.tenant_id, found.contact_id, found.query)
    assert shown == expected


# -- the page and its files --------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["/inspect", "/inspect/", "/inspect?tenant=demo", "/inspect/tenants/demo/contacts/a%40b.c"],
)
def test_every_page_path_is_the_one_page_with_its_policy(server, transport, target):
    status, headers, payload = request(server, "GET", target)

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert payload == (STATIC_DIR / "index.html").read_bytes()
    assert transport.calls == []


@pytest.mark.parametrize(
    ("name", "content_type"),
    [
        ("inspector.js", "text/javascript; charset=utf-8"),
        ("inspector.css", "text/css; charset=utf-8"),
        ("index.html", "text/html; charset=utf-8"),
    ],
)
def test_the_static_files_are_served_with_their_type(server, name, content_type):
    status, headers, payload = request(server, "GET", f"/inspect/static/{name}")

    assert status == 200
    assert headers["Content-Type"] == content_type
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert payload == (STATIC_DIR / name).read_bytes()


@pytest.mark.parametrize(
    "target",
    [
        "/inspect/static/../server.py",
        "/inspect/static/..%2Fserver.py",
        "/inspect/static/%2E%2E/server.py",
        "/inspect/static/..%5Cserver.py",
        "/inspect/static//etc/passwd",
        "/inspect/static/%2Fetc%2Fpasswd",
        "/inspect/static/",
        "/inspect/static/../../README.md",
        "/inspect/../inspector/server.py",
    ],
)
def test_nothing_outside_the_static_directory_is_served(server, target):
    status, _, payload = request(server, "GET", target)

    assert status == 404
    assert b"import" not in payload


def test_the_deployed_server_lists_no_tenants(server):
    status, _, payload = request(server, "GET", "/inspect/api/tenants")

    assert (status, json.loads(payload)) == (200, {"tenants": []})


def test_the_root_leads_to_the_page(server):
    status, headers, _ = request(server, "GET", "/")

    assert status == 302
    assert headers["Location"] == "/inspect"


# -- the static files themselves ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["index.html", "inspector.css", "inspector.js"])
def test_the_page_names_no_address_outside_its_origin(name):
    text = (STATIC_DIR / name).read_text(encoding="utf-8")

    assert not re.search(r"[a-z]+://|//[A-Za-z0-9-]+\.[A-Za-z]", text, re.IGNORECASE)
    assert "@import" not in text


def test_the_script_never_writes_markup():
    script = (STATIC_DIR / "inspector.js").read_text(encoding="utf-8")

    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script
