"""The HTTP API, on one shared runner over the example rules; each test uses its own contact."""

from __future__ import annotations

import re
import time
import uuid

from memory_core.converse_shape import CACHE_POINT
from tests.e2e.runner_process import Runner

CONVERSE_PATH = "/v1/tenants/{tenant_id}/contacts/{contact_id}/converse"


def _contact() -> str:
    return f"contact-{uuid.uuid4().hex[:12]}"


def test_health_answers_ok(shared_runner: Runner):
    status, _, answer = shared_runner.request("GET", "/health")

    assert (status, answer) == (200, {"status": "ok"})


def test_the_second_converse_holds_the_first_exchange(shared_runner: Runner):
    contact = _contact()

    first_status, first = shared_runner.converse("demo", contact, "What are your opening hours?")
    reply_status, reply = shared_runner.reply("demo", contact, "We open at nine.")
    second_status, second = shared_runner.converse("demo", contact, "And on Saturdays?")

    assert (first_status, first["decision"], first["turnCount"]) == (200, "model", 1)
    assert first["history"] == []
    assert reply_status == 201
    assert reply["turn"]["role"] == "assistant"
    assert reply["turn"]["content"] == [{"text": "We open at nine."}]
    assert (second_status, second["decision"], second["turnCount"]) == (200, "model", 2)
    assert second["history"] == [
        {"role": "user", "content": [{"text": "What are your opening hours?"}]},
        {"role": "assistant", "content": [{"text": "We open at nine."}]},
    ]
    assert second["current"] == {"role": "user", "content": [{"text": "And on Saturdays?"}]}
    # The history and the current message, a cache point after the history (SPEC 5).
    answered = {**second["history"][1], "content": [*second["history"][1]["content"], CACHE_POINT]}
    assert second["converse"]["messages"] == [second["history"][0], answered, second["current"]]


def test_the_memory_route_answers_for_a_recorded_contact(shared_runner: Runner):
    contact = _contact()
    shared_runner.converse("demo", contact, "Hello")

    recorded_status, _, _ = shared_runner.request(
        "GET", f"/v1/tenants/demo/contacts/{contact}/memory"
    )
    unknown_status, _, unknown = shared_runner.request(
        "GET", f"/v1/tenants/demo/contacts/{_contact()}/memory"
    )

    assert recorded_status == 200
    assert (unknown_status, unknown["error"]["code"]) == (404, "not_found")


def test_openapi_is_a_json_document_listing_the_converse_route(shared_runner: Runner):
    status, headers, document = shared_runner.request("GET", "/openapi.json")

    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert document["openapi"].startswith("3.")
    assert "post" in document["paths"][CONVERSE_PATH]


def test_an_unknown_tenant_is_refused_with_404(shared_runner: Runner):
    status, answer = shared_runner.converse("no-such-tenant", _contact(), "Hello")

    assert status == 404
    assert answer["error"]["code"] == "unknown_tenant"
    assert "no-such-tenant" in answer["error"]["message"]


def test_a_bad_body_is_refused_with_400_naming_the_field(shared_runner: Runner):
    status, _, answer = shared_runner.request(
        "POST", f"/v1/tenants/demo/contacts/{_contact()}/converse", {"message": {"text": 5}}
    )

    assert status == 400
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith("message.text:")


def test_a_body_over_10_mb_is_refused_with_413_before_the_handler(shared_runner: Runner):
    contact = _contact()
    oversized = b'{"message": {"text": "' + b"a" * (10 * 1024 * 1024) + b'"}}'

    status, _, answer = shared_runner.request(
        "POST", f"/v1/tenants/demo/contacts/{contact}/converse", raw=oversized
    )
    memory_status, _, _ = shared_runner.request(
        "GET", f"/v1/tenants/demo/contacts/{contact}/memory"
    )

    assert status == 413
    assert answer["error"]["code"] == "payload_too_large"
    assert memory_status == 404, "the refused message must not have been recorded"


def test_the_runner_announces_where_it_listens_and_a_working_curl(shared_runner: Runner):
    output = shared_runner.stdout()

    assert f"listening on {shared_runner.base_url}" in output
    assert f"curl -s -X POST {shared_runner.base_url}/v1/tenants/acme-legal/contacts/" in output


def test_a_method_the_gateway_does_not_forward_is_405_in_the_error_shape(shared_runner: Runner):
    for method in ("TRACE", "QUERY", "BREW"):
        for path in ("/health", CONVERSE_PATH.format(tenant_id="demo", contact_id=_contact())):
            status, headers, answer = shared_runner.request(method, path)
            assert status == 405, (method, path)
            assert answer["error"]["code"] == "method_not_allowed"
            assert method in answer["error"]["message"]
            assert "POST" in headers["Allow"]


def test_the_terminal_gets_one_readable_line_a_request(shared_runner: Runner):
    status, _ = shared_runner.converse("demo", "one-line", "Hello")
    assert status == 200
    # The line is written once the answer is sent: soon after the client has it.
    deadline = time.monotonic() + 10
    while not (access := [ln for ln in shared_runner.stderr().splitlines() if "/one-line/" in ln]):
        assert time.monotonic() < deadline, shared_runner.stderr()[-2000:]
        time.sleep(0.05)
    assert len(access) == 1
    assert re.fullmatch(
        r'127\.0\.0\.1 - "POST /v1/tenants/demo/contacts/one-line/converse" 200 \d+ ms model',
        access[0],
    )
    # No metrics blob a request, no INFO lines: the handler's warnings and errors only.
    assert '"_aws"' not in shared_runner.stdout()
    assert '"level":"INFO"' not in shared_runner.stdout().replace(" ", "")
