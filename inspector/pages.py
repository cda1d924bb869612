"""The inspector's own answers: its page, its static files and its tenants list.

Both servers ask `page_answer` first for a GET or HEAD under `/inspect` and
write what it returns; nothing here knows how the API behind the page is
reached. The page is one `index.html` for every page path: its script reads
the path (`/inspect`, `/inspect?tenant=t`, `/inspect/tenants/{t}/contacts/{c}`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
PREFIX = "/inspect"
STATIC_PREFIX = f"{PREFIX}/static/"
TENANTS_PATH = f"{PREFIX}/api/tenants"

_PAGE_PATHS = re.compile(r"/inspect/?|/inspect/tenants/[^/]+/contacts/[^/]+")

CONTENT_TYPES: Mapping[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}

# The page loads nothing from elsewhere; the policy makes that hold even for a text
# in the data that a bug would let through as markup.
_PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


@dataclass(frozen=True, slots=True)
class PageAnswer:
    status: int
    content_type: str
    body: bytes
    extra_headers: Mapping[str, str] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        """Every header but Content-Length (a HEAD's answer has none to give)."""
        return {
            "Content-Type": self.content_type,
            # An operator reloading the page after an upgrade gets the new script.
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            **self.extra_headers,
        }


def write_answer(request: BaseHTTPRequestHandler, answer: PageAnswer) -> None:
    """Send `answer` on `request`'s connection; a HEAD gets the headers only."""
    request.send_response(answer.status)
    for name, value in answer.headers().items():
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(answer.body)))
    request.end_headers()
    if request.command != "HEAD":
        request.wfile.write(answer.body)


def is_inspector_path(path: str) -> bool:
    """The path (no query) is the inspector's: `/inspect` or anything under `/inspect/`."""
    return path == PREFIX or path.startswith(PREFIX + "/")


def page_answer(path: str, tenant_ids: Iterable[str]) -> PageAnswer:
    """The answer to a GET of `path` (no query), an inspector path; 404 for one it lacks.

    Static files are looked up by name among the files of `static/`, never joined
    onto a path, so no `..` or encoded separator can reach outside it.
    """
    if path == TENANTS_PATH:
        return json_answer(HTTPStatus.OK, {"tenants": sorted(tenant_ids)})
    found = None
    if _PAGE_PATHS.fullmatch(path):
        found = _static_file("index.html", _PAGE_POLICY)
    elif path.startswith(STATIC_PREFIX):
        found = _static_file(path.removeprefix(STATIC_PREFIX))
    if found is not None:
        return found
    return error_answer(HTTPStatus.NOT_FOUND, "not_found", f"the inspector has no page {path}")


def json_answer(status: int, body: object) -> PageAnswer:
    return PageAnswer(status, "application/json", json.dumps(body).encode("utf-8"))


def error_answer(status: int, code: str, message: str) -> PageAnswer:
    """A refusal in the API's error shape, so the page reads every error one way."""
    return json_answer(status, {"error": {"code": code, "message": message}})


def _static_file(name: str, policy: str | None = None) -> PageAnswer | None:
    found = _STATIC_FILES.get(name)
    if found is None:
        return None
    content_type = CONTENT_TYPES.get(found.suffix, "application/octet-stream")
    headers = {"Content-Security-Policy": policy} if policy else {}
    return PageAnswer(HTTPStatus.OK, content_type, found.read_bytes(), headers)


_STATIC_FILES: Mapping[str, Path] = {
    entry.name: entry for entry in STATIC_DIR.iterdir() if entry.is_file()
}
"""The files that may be served, by name: what `static/` holds, nothing below or above it."""
