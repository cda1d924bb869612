"""The inspector against a deployed stack: its page on loopback, its reads sent on signed.

The page asks for three listings (a tenant's contacts, a contact's turns, the
window preview); this server sends each on through the client's HTTP
transport, SigV4-signed with the operator's AWS credentials, so the browser
holds none. It only reads: a method other than GET or HEAD is 405, a path
other than those three and the page's own is 404, and nothing else is ever
sent on. It listens on loopback only, since whoever reaches it reads
conversations with the operator's credentials.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
import sys
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote

from conversation_memory_client import MemoryClient, NotConfigured
from conversation_memory_client.transports import Action, Call, TransientFailure, Transport
from inspector.pages import (
    PageAnswer,
    error_answer,
    is_inspector_path,
    json_answer,
    page_answer,
    write_answer,
)

DEFAULT_PORT = 8100
READ_TIMEOUT_SECONDS = 15.0
ALLOWED_METHODS = ("GET", "HEAD")
MAX_DISCARD_BYTES = 1024 * 1024
"""A refused request's body read and dropped before closing, so the client reads the 405
rather than a connection reset."""

_FORWARDED: tuple[tuple[re.Pattern[str], Action], ...] = (
    (re.compile(r"/v1/tenants/([^/]+)/contacts"), "contacts"),
    (re.compile(r"/v1/tenants/([^/]+)/contacts/([^/]+)/turns"), "turns"),
    (re.compile(r"/v1/tenants/([^/]+)/contacts/([^/]+)/window"), "window"),
)
"""The API's reads the page makes, each as the client's action."""
_LISTINGS = frozenset({"contacts", "turns"})
_LISTING_PARAMETERS = ("limit", "cursor")


class NotLoopback(ValueError):
    """The inspector was asked to listen where others could reach it."""


def loopback_address(host: str) -> str:
    """`host` as an address to bind, if it is a loopback one (`localhost` is 127.0.0.1);
    NotLoopback otherwise. A name other than `localhost` is refused: it may resolve anywhere."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise NotLoopback(f"{host!r} is not an IP address; use 127.0.0.1 or ::1") from None
    if not address.is_loopback:
        raise NotLoopback(
            f"refusing to listen on {host}: the inspector reads conversations with your AWS "
            "credentials and answers anyone who reaches it; use a loopback address "
            "(127.0.0.1 or ::1) and, from another machine, an SSH tunnel"
        )
    return str(address)


def signed_transport(api_url: str) -> Transport:
    """The transport `MemoryClient.over_http` sends with: SigV4 for `execute-api`, the region
    from the URL or the AWS configuration, credentials from the usual chain, refreshed as they
    expire. Taken from the client so that signing is decided in one place; each page request
    is tried once (reloading the page is the retry)."""
    return MemoryClient.over_http(api_url).transport


def forwarded_call(path: str, query: str) -> Call | None:
    """The read a GET of `path?query` asks for, or None for a path the page never asks."""
    for pattern, action in _FORWARDED:
        found = pattern.fullmatch(path)
        if found is None:
            continue
        tenant_id, *contact = (unquote(segment) for segment in found.groups())
        page = {name: value for name, value in parse_qsl(query) if name in _LISTING_PARAMETERS}
        return Call(
            action,
            tenant_id,
            contact[0] if contact else None,
            query=page if page and action in _LISTINGS else None,
        )
    return None


class InspectorServer(ThreadingHTTPServer):
    """The page and the three reads, on a loopback address only."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], transport: Transport) -> None:
        host = loopback_address(address[0])
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, address[1]), _InspectorRequestHandler)
        self.transport = transport

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"{host!s}"
        return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


class _InspectorRequestHandler(BaseHTTPRequestHandler):
    server: InspectorServer
    timeout = READ_TIMEOUT_SECONDS
    protocol_version = "HTTP/1.0"
    server_version = "conversation-memory-inspector"

    _started = 0.0

    def handle_one_request(self) -> None:
        self._started = time.perf_counter()
        super().handle_one_request()

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if is_inspector_path(path):
            # The rules live in AppConfig: the page asks for a typed tenant id instead.
            self._write(page_answer(path, ()))
        elif path == "/":
            self._write(PageAnswer(HTTPStatus.FOUND, "text/plain", b"", {"Location": "/inspect"}))
        else:
            call = forwarded_call(path, query)
            self._write(self._sent_on(call) if call else _not_found(path))

    do_HEAD = do_GET

    def _sent_on(self, call: Call) -> PageAnswer:
        try:
            answer = self.server.transport.send(call)
        except TransientFailure as failure:
            return error_answer(HTTPStatus.BAD_GATEWAY, failure.code, failure.message)
        except NotConfigured as refusal:
            return error_answer(HTTPStatus.SERVICE_UNAVAILABLE, "not_configured", str(refusal))
        if answer.body is None:
            return error_answer(
                HTTPStatus.BAD_GATEWAY,
                "not_json",
                f"the API answered {answer.status} without a JSON body",
            )
        return json_answer(answer.status, answer.body)

    def _write(self, answer: PageAnswer) -> None:
        write_answer(self, answer)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals in the API's error shape; a method without a `do_`
        (POST, DELETE, anything but GET and HEAD) is 405, never sent on."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            self._discard_body()
            refusal = error_answer(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method_not_allowed",
                f"{self.command} is not served: the inspector only reads (GET, HEAD)",
            )
            headers = {**refusal.extra_headers, "Allow": ", ".join(ALLOWED_METHODS)}
            self._write(PageAnswer(refusal.status, refusal.content_type, refusal.body, headers))
            return
        status = HTTPStatus(code)
        self._write(error_answer(status, status.phrase.lower().replace(" ", "_"), message or ""))

    def _discard_body(self) -> None:
        declared = self.headers.get("Content-Length", "") if self.headers else ""
        if declared.isdigit():
            # Gone or silent: the answer is written all the same.
            with contextlib.suppress(OSError):
                self.rfile.read(min(int(declared), MAX_DISCARD_BYTES))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One line a request, as the local gateway writes it: method, path, status, time."""
        elapsed_ms = (time.perf_counter() - self._started) * 1000
        request = f"{self.command} {self.path}" if self.command else self.requestline or "-"
        line = f'{self.address_string()} - "{_printable(request)}" {code} {elapsed_ms:.0f} ms\n'
        sys.stderr.write(line)

    def log_error(self, format: str, *args: Any) -> None:
        """http.server's own complaint: the request's one line already says the status."""


def _not_found(path: str) -> PageAnswer:
    return error_answer(
        HTTPStatus.NOT_FOUND,
        "not_found",
        f"{path} is not served: the inspector sends on only the contacts, turns and window reads",
    )


def _printable(text: str) -> str:
    """A client's text for the terminal, every non-printable character escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
