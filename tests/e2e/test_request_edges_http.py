"""Request edges over HTTP, on the local runner: bytes as sent, keys given twice, methods,
sizes, media types, ids.

The gateway hands a JSON body to the handler as its bytes (base64, as API
Gateway does for a binary media type), so bytes that are not UTF-8 are refused,
never stored as U+FFFD; every method reaches the handler, which answers a
wrong one 405 with `Allow`; a HEAD is answered without a body. A body declared
over 10 MB is answered 413 at once, never waited for; a Content-Length that is
no length is 400; a POST without a Content-Type is 415; a control character in
an id is 400 naming the id, sent raw or percent-encoded.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any

import pytest

from tests.e2e.runner_process import Runner

CONVERSE = "/v1/tenants/demo/contacts/{contact}/converse"
MEMORY = "/v1/tenants/demo/contacts/{contact}/memory"


def _contact() -> str:
    return f"edges-{uuid.uuid4().hex[:12]}"


def _nothing_recorded(runner: Runner, contact: str) -> bool:
    status, _, _ = runner.request("GET", MEMORY.format(contact=contact))
    return status == 404


def _raw_exchange(runner: Runner, request: bytes) -> bytes:
    """What the runner writes back for `request`, to the last byte (HTTP/1.0: it closes)."""
    with socket.create_connection(("127.0.0.1", runner.port), timeout=15) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received


# -- bodies that are not UTF-8 -------------------------------------------------------


LATIN_1 = '{"message": {"text": "h\u00e9llo"}}'.encode("latin-1")
FF_FE = b'{"message": {"text": "a\xff\xfeb"}}'


@pytest.mark.parametrize(
    ("raw", "content_type", "message"),
    [
        pytest.param(
            LATIN_1,
            "application/json",
            f"body: not UTF-8 (byte 0xe9 at offset {LATIN_1.index(0xE9)})",
            id="latin-1 bytes",
        ),
        pytest.param(
            FF_FE,
            "application/json",
            f"body: not UTF-8 (byte 0xff at offset {FF_FE.index(0xFF)})",
            id="ff fe in a string",
        ),
        pytest.param(
            LATIN_1,
            "application/json; charset=latin-1",
            "body: Content-Type charset 'latin-1'",
            id="declared latin-1",
        ),
        pytest.param(
            FF_FE,
            "text/plain",
            "Content-Type: 'text/plain'",
            id="not JSON, not UTF-8",
        ),
    ],
)
def test_a_body_that_is_not_utf_8_is_refused_and_nothing_is_recorded(
    shared_runner: Runner, raw: bytes, content_type: str, message: str
):
    contact = _contact()

    status, headers, answer = shared_runner.request(
        "POST", CONVERSE.format(contact=contact), raw=raw, content_type=content_type
    )

    assert status == (415 if content_type == "text/plain" else 400), answer
    assert answer["error"]["message"].startswith(message)
    assert headers["Content-Type"] == "application/json"
    assert _nothing_recorded(shared_runner, contact)


def test_utf_8_declared_with_its_charset_is_kept_exactly(shared_runner: Runner):
    contact = _contact()
    raw = '{"message": {"text": "h\u00e9llo \ufffd"}}'.encode()

    status, _, answer = shared_runner.request(
        "POST",
        CONVERSE.format(contact=contact),
        raw=raw,
        content_type="application/json; charset=UTF-8",
    )

    assert status == 200, answer
    assert answer["current"]["content"] == [{"text": "h\u00e9llo \ufffd"}]


# -- a key given twice ---------------------------------------------------------------


def test_a_key_given_twice_is_refused_naming_it(shared_runner: Runner):
    contact = _contact()

    status, _, answer = shared_runner.request(
        "POST",
        CONVERSE.format(contact=contact),
        raw=b'{"message": {"text": "a", "text": "b"}}',
    )

    assert status == 400
    assert answer["error"]["message"] == "body: not valid JSON (duplicate key 'text')"
    assert _nothing_recorded(shared_runner, contact)


# -- blank text ----------------------------------------------------------------------


def test_zero_width_text_is_refused_naming_the_field(shared_runner: Runner):
    contact = _contact()

    status, _, answer = shared_runner.request(
        "POST", CONVERSE.format(contact=contact), {"message": {"text": "\u200b\u2060\u0000"}}
    )

    assert status == 400
    assert answer["error"]["message"].startswith("message.text: must not be blank")
    assert _nothing_recorded(shared_runner, contact)


# -- methods -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", CONVERSE, "POST"),
        ("PUT", CONVERSE, "POST"),
        ("PATCH", CONVERSE, "POST"),
        ("OPTIONS", CONVERSE, "POST"),
        ("DELETE", "/health", "GET, HEAD"),
        ("POST", "/health", "GET, HEAD"),
        ("POST", MEMORY, "GET"),
        ("DELETE", MEMORY, "GET"),
    ],
)
def test_a_wrong_method_on_a_known_path_is_405_with_allow(
    shared_runner: Runner, method: str, path: str, allow: str
):
    contact = _contact()
    target = path.format(contact=contact)

    status, headers, answer = shared_runner.request(method, target, {"message": {"text": "hi"}})

    assert status == 405, answer
    assert headers["Allow"] == allow
    assert answer["error"]["code"] == "method_not_allowed"
    assert answer["error"]["message"] == f"{method} is not allowed on {target}; use {allow}"
    assert _nothing_recorded(shared_runner, contact)


@pytest.mark.parametrize(("method", "path"), [("GET", "/nothing"), ("DELETE", "/v1/tenants")])
def test_an_unknown_path_stays_404(shared_runner: Runner, method: str, path: str):
    status, headers, answer = shared_runner.request(method, path)

    assert status == 404
    assert answer["error"]["code"] == "not_found"
    assert "Allow" not in headers


def test_head_on_health_is_200_with_no_body_written(shared_runner: Runner):
    received = _raw_exchange(shared_runner, b"HEAD /health HTTP/1.0\r\nHost: x\r\n\r\n")

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 ")
    assert b"\r\nContent-Type: application/json" in head
    # No Content-Length: it would have to be the GET's (RFC 9110 8.6).
    assert b"content-length" not in head.lower()
    assert body == b""


def test_head_on_a_route_without_it_is_405_with_no_body_written(shared_runner: Runner):
    target = CONVERSE.format(contact=_contact()).encode()
    received = _raw_exchange(shared_runner, b"HEAD " + target + b" HTTP/1.0\r\nHost: x\r\n\r\n")

    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 405 ")
    assert b"\r\nAllow: POST" in head
    assert body == b""


def test_the_access_log_has_one_line_for_a_head(shared_runner: Runner):
    _raw_exchange(shared_runner, b"HEAD /health?probe=edges HTTP/1.0\r\n\r\n")
    # The line is written once the answer is sent: soon after the client has it.
    deadline = time.monotonic() + 10
    while not (lines := [ln for ln in shared_runner.stderr().splitlines() if "probe" in ln]):
        assert time.monotonic() < deadline, shared_runner.stderr()[-2000:]
        time.sleep(0.05)
    assert len(lines) == 1
    assert '"HEAD /health?probe=edges" 200 ' in lines[0]


# -- sizes: answered at once, on the declared length ---------------------------------

LIMIT = 10 * 1024 * 1024
PROMPTLY_SECONDS = 5.0
"""A generous bound: the answer is immediate; before the fix the runner waited 15 s, then
closed without one."""


def _answer_within(
    runner: Runner, request: bytes, seconds: float = PROMPTLY_SECONDS
) -> tuple[int, dict[str, str], Any]:
    """The answer to `request` (status, headers, JSON body), read as soon as it is whole.

    The connection stays open on the client's side, as a client that declared a body
    and waits keeps it: the answer must not need the client to send or close anything.
    A runner that does not answer within `seconds` fails the test (socket timeout).
    """
    with socket.create_connection(("127.0.0.1", runner.port), timeout=seconds) as connection:
        connection.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = connection.recv(65536)
            assert chunk, f"closed without an answer: {received!r}"
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        while len(body) < int(headers["Content-Length"]):
            chunk = connection.recv(65536)
            assert chunk, f"closed mid-answer: {received!r}"
            body += chunk
    return int(lines[0].split()[1]), headers, json.loads(body)


def _post(target: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"POST {target} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@pytest.mark.parametrize(
    ("declared", "size"),
    [
        ("1000000000000", "is 1000000000000 bytes"),
        (str(LIMIT + 1), f"is {LIMIT + 1} bytes"),
        ("9" * 100, "is over the limit"),
    ],
)
def test_a_content_length_over_10_mb_is_413_at_once_without_the_body(
    shared_runner: Runner, declared: str, size: str
):
    contact = _contact()
    request = _post(
        CONVERSE.format(contact=contact),
        "Content-Type: application/json",
        f"Content-Length: {declared}",
        body=b'{"message": {"text": "the first bytes of a huge body',
    )

    started = time.monotonic()
    status, headers, answer = _answer_within(shared_runner, request)
    waited = time.monotonic() - started

    assert status == 413, answer
    assert headers["Content-Type"] == "application/json"
    assert answer == {
        "error": {
            "code": "payload_too_large",
            "message": f"the request body {size}; the limit is {LIMIT} bytes (10 MB)",
        }
    }
    assert waited < PROMPTLY_SECONDS
    assert _nothing_recorded(shared_runner, contact)


def test_a_client_that_sends_the_huge_body_anyway_still_reads_its_413(shared_runner: Runner):
    """The answer comes first, then the gateway reads and drops what is still sent: a client
    uploading the whole body is not reset mid-upload before it can read the 413."""
    contact = _contact()
    body = b"x" * (LIMIT + 1)
    request = _post(
        CONVERSE.format(contact=contact),
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    )

    with socket.create_connection(("127.0.0.1", shared_runner.port), timeout=30) as connection:
        connection.sendall(request + body)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk

    assert received.startswith(b"HTTP/1.0 413 "), received[:200]
    assert b'"payload_too_large"' in received
    assert _nothing_recorded(shared_runner, contact)


@pytest.mark.parametrize("declared", ["-1", "abc", "1_0", "+5", "0x10", "5.0", "5, 6", ""])
def test_a_content_length_that_is_no_length_is_400_at_once(shared_runner: Runner, declared: str):
    contact = _contact()
    request = _post(
        CONVERSE.format(contact=contact),
        "Content-Type: application/json",
        f"Content-Length: {declared}",
        body=b'{"message": {"text": "hi"}}',
    )

    status, _, answer = _answer_within(shared_runner, request)

    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith(f"Content-Length: {declared!r} is not a length")
    assert _nothing_recorded(shared_runner, contact)


def test_a_content_length_repeated_with_one_value_is_that_length(shared_runner: Runner):
    raw = b'{"message": {"text": "hi"}}'
    request = _post(
        CONVERSE.format(contact=_contact()),
        "Content-Type: application/json",
        f"Content-Length: {len(raw)}",
        f"Content-Length: {len(raw)}",
        body=raw,
    )

    status, _, answer = _answer_within(shared_runner, request)

    assert status == 200, answer


# -- a body without a Content-Type ---------------------------------------------------


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        (CONVERSE, b'{"message": {"text": "hi"}}'),
        ("/v1/tenants/demo/contacts/{contact}/turns", b'{"role": "assistant", "text": "hi"}'),
    ],
)
def test_a_post_without_a_content_type_is_415_and_nothing_is_recorded(
    shared_runner: Runner, path: str, raw: bytes
):
    contact = _contact()
    request = _post(path.format(contact=contact), f"Content-Length: {len(raw)}", body=raw)

    status, headers, answer = _answer_within(shared_runner, request)

    assert status == 415, answer
    assert headers["Content-Type"] == "application/json"
    assert answer == {
        "error": {
            "code": "unsupported_media_type",
            "message": "Content-Type: missing; the body must be application/json",
        }
    }
    assert _nothing_recorded(shared_runner, contact)


def test_a_get_without_a_content_type_is_served(shared_runner: Runner):
    contact = _contact()
    assert shared_runner.converse("demo", contact, "hello")[0] == 200

    for target in ("/health", MEMORY.format(contact=contact)):
        request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        status, _, answer = _answer_within(shared_runner, request)
        assert status == 200, (target, answer)


# -- ids with a control character ----------------------------------------------------


@pytest.mark.parametrize(
    ("target", "field"),
    [
        pytest.param(b"/v1/tenants/demo/contacts/a\x01b/converse", "contactId", id="raw 01"),
        pytest.param(b"/v1/tenants/demo/contacts/a\x7fb/converse", "contactId", id="raw DEL"),
        pytest.param(b"/v1/tenants/demo/contacts/a\x00b/converse", "contactId", id="raw NUL"),
        pytest.param(b'/v1/tenants/demo/contacts/a"b/converse', "contactId", id="raw quote"),
        pytest.param(b"/v1/tenants/demo/contacts/a\\b/converse", "contactId", id="raw backslash"),
        pytest.param(
            b"/v1/tenants/demo/contacts/caf\xc3\xa9/converse", "contactId", id="raw UTF-8"
        ),
        pytest.param(b"/v1/tenants/demo/contacts/a%01b/converse", "contactId", id="encoded 01"),
        pytest.param(b"/v1/tenants/de\x01mo/contacts/c1/converse", "tenantId", id="tenant raw 01"),
        pytest.param(b"/v1/tenants/de%01mo/contacts/c1/converse", "tenantId", id="tenant encoded"),
    ],
)
def test_a_control_character_in_an_id_is_400_naming_it(
    shared_runner: Runner, target: bytes, field: str
):
    raw = b'{"message": {"text": "hi"}}'
    request = (
        b"POST " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw
    )

    status, _, answer = _answer_within(shared_runner, request)

    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith(f"{field}: "), answer


@pytest.mark.parametrize("contact", ["a%01b", "a%00b", "a%7Fb"])
def test_percent_encoded_through_an_ordinary_client_too(shared_runner: Runner, contact: str):
    for method, path in (("POST", CONVERSE), ("GET", MEMORY)):
        status, _, answer = shared_runner.request(
            method,
            path.format(contact=contact),
            {"message": {"text": "hi"}} if method == "POST" else None,
        )
        assert status == 400, answer
        assert answer["error"]["message"].startswith("contactId: "), answer
