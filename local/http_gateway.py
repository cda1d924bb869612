"""A local stand-in for API Gateway: HTTP on loopback, each request a proxy event for the Lambda.

Every request, `/health` and `/openapi.json` included, is handed to the
Lambda's own `lambda_handler` as an HTTP API event (payload format 2.0), and
its answer (status,
headers, body) is written back as it is, so no route exists twice. The one
exception is the operator's inspector: a GET or HEAD under `/inspect` is its
page, its static files or its tenants list (`inspector.pages`), answered here
because the deployed API has no such route. What API
Gateway itself refuses before a Lambda runs (a body over 10 MB, on its declared
size and at once; a Content-Length that is no length) is refused here the same
way. Bodies reach the handler as API Gateway passes them: UTF-8 text as text,
other bytes base64-encoded (`proxy_events.event_body`), never decoded here with
replacement characters, and with the headers as sent (no Content-Type made up
for a client that sent none); a HEAD is answered without a body.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

from converse_history.errors import ApiError
from converse_history.proxy_event import MAX_BODY_BYTES, payload_too_large
from inspector.pages import PageAnswer, is_inspector_path, page_answer, write_answer
from local.proxy_events import LambdaContextStandIn, proxy_event

LambdaHandler = Callable[[dict[str, Any], Any], Mapping[str, Any]]
TenantIds = Callable[[], Iterable[str]]
"""The tenants the inspector lists, asked at each request: a rules reload shows at once."""

FORWARDED_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
"""The methods the HTTP API's routes and its `$default` route pass to the Lambda."""

INSPECTOR_METHODS = frozenset({"GET", "HEAD"})
"""What the inspector answers under `/inspect`; any other method there goes to the Lambda."""

# MAX_BODY_BYTES is API Gateway's 10 MB, as the Lambda holds to it: one limit, one 413.
MAX_DISCARD_BYTES = 8 * MAX_BODY_BYTES
"""How much of a refused body is read and dropped, after the answer, before closing."""

LINGER_IDLE_SECONDS = 2.0
"""After a refusal, a client silent this long has nothing more to send: the connection closes."""

_DECISION = re.compile(rb'\{"decision":\s*"([a-z_]+)"')

LISTEN_BACKLOG = 128
"""Connections the kernel holds for the gateway before it accepts them."""

READ_TIMEOUT_SECONDS = 15.0
"""A client that stops sending mid-request frees its thread (and the shutdown) after this."""

# Hop-by-hop and framing headers belong to this connection, not to the answer's content.
_HEADERS_WRITTEN_BY_THE_GATEWAY = frozenset(
    {"content-length", "connection", "transfer-encoding", "date", "server"}
)


class LambdaGateway(ThreadingHTTPServer):
    """Serves one Lambda handler; connections are threaded, invocations are one at a time.

    A Lambda execution environment runs one invocation at a time, and the
    handler is written for that: Powertools' resolver keeps the current event
    on the app, and Logger and Metrics keep per-invocation state in the
    module. Running two invocations at once in one process would mix them,
    so the invocations are serialised while reading and writing stay
    concurrent.
    """

    # Shutting down waits for the requests in flight, so none is cut off while
    # the emulation behind it is stopped; READ_TIMEOUT_SECONDS bounds the wait.
    daemon_threads = False
    block_on_close = True
    # socketserver's default listen backlog is 5: an agent's burst of parallel calls
    # overflowed it and the extra connections were reset, never processed. Like API
    # Gateway, the gateway accepts them all; the invocations still run one at a time.
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        handler: LambdaHandler,
        invocation_lock: threading.Lock | None = None,
        inspector_tenants: TenantIds = lambda: (),
    ) -> None:
        super().__init__(address, _ProxyRequestHandler)
        self.lambda_handler = handler
        # Shared with the compaction poller: one invocation at a time in this process.
        self.invocation_lock = invocation_lock or threading.Lock()
        self.inspector_tenants = inspector_tenants

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _ProxyRequestHandler(BaseHTTPRequestHandler):
    server: LambdaGateway
    timeout = READ_TIMEOUT_SECONDS
    # One request per connection, as HTTP/1.0: an idle keep-alive connection
    # would otherwise hold a thread, and the shutdown, until it times out.
    protocol_version = "HTTP/1.0"
    server_version = "conversation-memory-local"

    # -- the one line a request -----------------------------------------------------

    _started = 0.0
    _status: int | None = None
    _decision: str | None = None

    def handle_one_request(self) -> None:
        """One request, then its one access-log line; a client gone mid-way is one line too."""
        self._begin()
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
            self._log_line("client disconnected before the answer")
            return
        if self._status is not None:
            self._log_line()

    def _begin(self) -> None:
        self._started = time.perf_counter()
        self._status = None
        self._decision = None

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # Called by send_response: the status is logged with the request's one line.
        self._status = int(code) if str(code).isdigit() else None

    def log_error(self, format: str, *args: Any) -> None:
        """http.server's own complaint (a malformed request line): the line says the status."""

    def _log_line(self, outcome: str | None = None) -> None:
        elapsed_ms = (time.perf_counter() - self._started) * 1000
        # A request line http.server could not parse is shown as received, escaped.
        request = f"{self.command} {self.path}" if self.command else self._raw_request_line()
        request = printable(request)
        status = outcome or f"{self._status} {elapsed_ms:.0f} ms"
        decision = f" {self._decision}" if self._decision and not outcome else ""
        sys.stderr.write(f'{self.address_string()} - "{request}" {status}{decision}\n')

    def _raw_request_line(self) -> str:
        line = getattr(self, "requestline", "") or getattr(self, "raw_requestline", b"")
        text = line.decode("latin-1") if isinstance(line, bytes) else str(line)
        return text.strip()[:200] or "-"

    def _forward(self) -> None:
        path = self.path.partition("?")[0]
        if self.command in INSPECTOR_METHODS and is_inspector_path(path):
            self._write_page(page_answer(path, self.server.inspector_tenants()))
            return
        body = self._read_body()
        if body is None:
            return  # already refused
        event = proxy_event(
            self.command,
            request_target(self.path),
            body,
            self._request_headers(),
            default_content_type=None,
        )
        context = LambdaContextStandIn(aws_request_id=event["requestContext"]["requestId"])
        try:
            with self.server.invocation_lock:
                answer = self.server.lambda_handler(event, context)
        except Exception:
            # What API Gateway answers when the Lambda itself fails: a 502,
            # with the traceback where a Lambda's would be, in its log.
            traceback.print_exc(file=sys.stderr)
            self._refuse(HTTPStatus.BAD_GATEWAY, "internal_error", "the handler failed")
            return
        self._write_answer(answer)

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering a refusal for it.

        Every refusal here is answered before any of the body is read: a client
        that declares 1 TB and waits for an answer gets its 413 at once.
        """
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._refuse_unread(
                ApiError(
                    HTTPStatus.LENGTH_REQUIRED,
                    "length_required",
                    "send the body with a Content-Length; chunked transfer is not supported",
                )
            )
            return None
        declared = self.headers.get_all("Content-Length") or []
        if not declared:
            return b""
        digits = declared_length(declared)
        if digits is None:
            shown = ", ".join(declared)
            self._refuse_unread(
                ApiError(
                    HTTPStatus.BAD_REQUEST,
                    "invalid_request",
                    f"Content-Length: {shown[:40]!r} is not a length; "
                    "send the body's size in bytes, in decimal digits",
                )
            )
            return None
        if len(digits) > len(str(MAX_BODY_BYTES)) or int(digits) > MAX_BODY_BYTES:
            # Refused on the declared size: a huge body is never waited for, nor buffered.
            exact = int(digits) if len(digits) <= 19 else None
            self._refuse_unread(payload_too_large(exact), expected=exact)
            return None
        try:
            return self.rfile.read(int(digits))
        except TimeoutError:
            # The client stopped sending: there is no complete request to answer.
            self.close_connection = True
            return None

    def _refuse_unread(self, error: ApiError, expected: int | None = None) -> None:
        """Answer `error` now, then read and drop what the client still sends, then close.

        The answer goes first, so a client waiting for it has it at once. The
        body is then drained (up to `expected` bytes, at most MAX_DISCARD_BYTES,
        until the client is silent for LINGER_IDLE_SECONDS), because closing a
        socket with unread data resets the connection, and a client in the
        middle of its upload would see the reset instead of the answer.
        """
        self._refuse(HTTPStatus(error.status), error.code, error.message)
        try:
            self.connection.shutdown(socket.SHUT_WR)  # the answer is whole: the client may read it
            self.connection.settimeout(LINGER_IDLE_SECONDS)
            remaining = min(expected or MAX_DISCARD_BYTES, MAX_DISCARD_BYTES)
            deadline = time.monotonic() + READ_TIMEOUT_SECONDS
            while remaining > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(remaining, 1024 * 1024))
                if not chunk:
                    return
                remaining -= len(chunk)
        except OSError:
            return  # silent for too long, or gone: nothing more to read

    def _request_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for received_name, value in self.headers.items():
            # A client's `Content-Type`, in any case, is passed on under one spelling; none is
            # made up for a client that sent none (the handler refuses a body without one).
            name = "Content-Type" if received_name.lower() == "content-type" else received_name
            # A repeated header reaches the Lambda joined, as in API Gateway's `headers`.
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        return headers

    def _write_answer(self, answer: Mapping[str, Any]) -> None:
        raw = answer.get("body") or ""
        payload = (
            base64.b64decode(raw) if answer.get("isBase64Encoded") else str(raw).encode("utf-8")
        )
        self._decision = _decision_of(payload)
        self.send_response(int(answer.get("statusCode", 200)))
        for name, values in _answer_headers(answer).items():
            if name.lower() in _HEADERS_WRITTEN_BY_THE_GATEWAY:
                continue
            for value in values:
                self.send_header(name, value)
        if self.command == "HEAD":
            # No body, and no Content-Length: it would have to be the GET's (RFC 9110
            # 8.6), which the handler's answer to a HEAD does not carry.
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _write_page(self, answer: PageAnswer) -> None:
        write_answer(self, answer)

    def _refuse(
        self,
        status: HTTPStatus,
        code: str,
        message: str,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        payload = json.dumps({"error": {"code": code, "message": message}}).encode("utf-8")
        self.send_response(status)
        for name, value in (extra_headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        # The unread part of a refused body must not be taken for the next request.
        self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server refuses itself (a method it has no `do_` for, a malformed
        request line, oversized headers), in the API's JSON error shape, not its HTML page.

        A method the gateway does not pass on (TRACE, QUERY, anything beyond
        API Gateway's `ANY`) is 405 with `Allow`, as API Gateway answers a
        method no resource declares, rather than http.server's 501.
        """
        if code == HTTPStatus.NOT_IMPLEMENTED:
            self._refuse(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method_not_allowed",
                f"{self.command} is not served; use one of {', '.join(FORWARDED_METHODS)}",
                extra_headers={"Allow": ", ".join(FORWARDED_METHODS)},
            )
            return
        status = HTTPStatus(code)
        self._refuse(status, status.phrase.lower().replace(" ", "_"), message or status.phrase)


_LENGTH = re.compile(r"[0-9]+")


def declared_length(values: list[str]) -> str | None:
    """The body's length as its Content-Length headers declare it, in digits without leading
    zeros; None when they declare none.

    RFC 9110 8.6: one or more decimal digits. A header repeated, or a list, with
    one value throughout is that value (`5, 5`); a sign, a `_`, hex, a fraction or
    values that differ are no length at all, and a request that cannot be framed
    is refused rather than guessed at (Python's `int()` would take `+5` and `1_0`).
    """
    found = {part.strip() for value in values for part in value.split(",")}
    if len(found) != 1:
        return None
    (digits,) = found
    if not _LENGTH.fullmatch(digits):
        return None
    return digits.lstrip("0") or "0"


_TARGET_CHARACTERS = ":/?#[]@!$&'()*+,;=%"
"""What a request target holds besides letters, digits and `-._~` (RFC 3986's reserved, `%`)."""
_NOT_IN_A_TARGET = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]")


def request_target(received: str) -> str:
    """The request target as a client should have sent it: bytes no URI holds percent-encoded.

    http.server passes the request line on as Latin-1, control characters and
    raw UTF-8 included. Percent-encoded, `a\\x01b` in a contact reaches the
    handler as `a%01b` and is refused by the id's pattern, naming `contactId`,
    as API Gateway passes a path; what was already encoded is left as it is.
    """
    if not _NOT_IN_A_TARGET.search(received):
        return received
    return quote(received.encode("latin-1"), safe=_TARGET_CHARACTERS)


def printable(text: str) -> str:
    """`text` with every non-printable character escaped (a TLS hello's bytes, NULs)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _decision_of(payload: bytes) -> str | None:
    """A converse answer's decision (`model`, `escalate`), for the access log.

    The handler writes it first in the answer: read there, the body is not parsed twice.
    """
    found = _DECISION.match(payload)
    return found.group(1).decode() if found else None


# http.server dispatches a request to `do_<METHOD>`: every forwarded method gets one, from
# the same tuple the 405's `Allow` names, so the two cannot disagree.
for _method in FORWARDED_METHODS:
    setattr(_ProxyRequestHandler, f"do_{_method}", _ProxyRequestHandler._forward)


def _answer_headers(answer: Mapping[str, Any]) -> dict[str, list[str]]:
    """The answer's headers, and its `cookies` as `Set-Cookie`, as the HTTP API writes them."""
    merged: dict[str, list[str]] = {
        str(name): [str(value)] for name, value in (answer.get("headers") or {}).items()
    }
    if answer.get("cookies"):
        merged["Set-Cookie"] = [str(cookie) for cookie in answer["cookies"]]
    return merged
