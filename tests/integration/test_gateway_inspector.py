"""The local gateway serves the inspector under `/inspect` itself, and hands everything else
to the Lambda as before."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from inspector.pages import STATIC_DIR
from local.http_gateway import LambdaGateway


class RecordingLambda:
    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        self.paths.append(f"{event['requestContext']['http']['method']} {event['rawPath']}")
        return {"statusCode": 200, "headers": {}, "body": json.dumps({"from": "lambda"})}


@pytest.fixture
def lambda_handler() -> RecordingLambda:
    return RecordingLambda()


@pytest.fixture
def tenants() -> list[str]:
    return ["zeta", "acme"]


@pytest.fixture
def gateway(lambda_handler: RecordingLambda, tenants: list[str]) -> Iterator[LambdaGateway]:
    server = LambdaGateway(
        ("127.0.0.1", 0), lambda_handler, inspector_tenants=lambda: list(tenants)
    )
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        serving.join()


def request(
    gateway: LambdaGateway, method: str, target: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = gateway.server_address[:2]
    connection = http.client.HTTPConnection(f"{host!s}", port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize(
    "target", ["/inspect", "/inspect/", "/inspect?tenant=acme", "/inspect/tenants/a/contacts/b"]
)
def test_the_page_is_served_by_the_gateway_not_the_lambda(gateway, lambda_handler, target):
    status, headers, payload = request(gateway, "GET", target)

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert payload == (STATIC_DIR / "index.html").read_bytes()
    assert lambda_handler.paths == []


def test_the_static_files_have_their_type_and_a_head_no_body(gateway):
    status, headers, payload = request(gateway, "GET", "/inspect/static/inspector.css")
    head_status, head_headers, head_payload = request(
        gateway, "HEAD", "/inspect/static/inspector.js"
    )

    assert (status, headers["Content-Type"]) == (200, "text/css; charset=utf-8")
    assert payload == (STATIC_DIR / "inspector.css").read_bytes()
    assert (head_status, head_payload) == (200, b"")
    assert head_headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert int(head_headers["Content-Length"]) == (STATIC_DIR / "inspector.js").stat().st_size


@pytest.mark.parametrize(
    "target",
    [
        "/inspect/static/../pages.py",
        "/inspect/static/..%2Fpages.py",
        "/inspect/static/%2e%2e%2fpages.py",
        "/inspect/static//etc/passwd",
        "/inspect/nothing-here",
    ],
)
def test_nothing_else_under_inspect_is_served(gateway, lambda_handler, target):
    status, _, payload = request(gateway, "GET", target)

    assert status == 404
    assert json.loads(payload)["error"]["code"] == "not_found"
    assert lambda_handler.paths == []


def test_the_tenants_are_the_runners_asked_at_each_request(gateway, tenants):
    first = json.loads(request(gateway, "GET", "/inspect/api/tenants")[2])
    tenants.append("beta")  # as a SIGHUP reload of the rules would
    second = json.loads(request(gateway, "GET", "/inspect/api/tenants")[2])

    assert first == {"tenants": ["acme", "zeta"]}
    assert second == {"tenants": ["acme", "beta", "zeta"]}


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", "/health"),
        ("GET", "/inspector"),
        ("GET", "/v1/tenants/acme/contacts/alice/window"),
        ("POST", "/inspect"),
        ("DELETE", "/inspect/api/tenants"),
    ],
)
def test_everything_else_still_goes_to_the_lambda(gateway, lambda_handler, method, target):
    body = b"{}" if method == "POST" else None
    status, _, payload = request(gateway, method, target, body)

    assert (status, json.loads(payload)) == (200, {"from": "lambda"})
    assert lambda_handler.paths == [f"{method} {target}"]


def test_each_inspector_request_is_one_access_log_line(gateway, capfd):
    request(gateway, "GET", "/inspect/api/tenants")
    request(gateway, "GET", "/inspect/static/missing.js")

    # The line is written once the answer is sent: the client may read it first.
    lines: list[str] = []
    deadline = time.monotonic() + 5
    while len(lines) < 2 and time.monotonic() < deadline:
        lines += capfd.readouterr().err.splitlines()
        time.sleep(0.01)
    assert [line.split(" - ", 1)[1].rsplit(" ", 2)[0] for line in lines] == [
        '"GET /inspect/api/tenants" 200',
        '"GET /inspect/static/missing.js" 404',
    ]
