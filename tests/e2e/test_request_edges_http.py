"""Request edges over HTTP, on the local runner: bytes as sent, keys given twice, methods.

The gateway hands a JSON body to the handler as its bytes (base64, as API
Gateway does for a binary media type), so bytes that are not UTF-8 are refused,
never stored as U+FFFD; every method reaches the handler, which answers a
wrong one 405 with `Allow`; a HEAD is answered without a body.
"""

from __future__ import annotations

import socket
import time
import uuid

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
