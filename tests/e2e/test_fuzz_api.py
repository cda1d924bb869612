"""The API fuzzed from its own OpenAPI document, with schemathesis, over a real local runner.

Every documented route is driven with generated requests, valid (positive)
and invalid (negative) ones, through schemathesis' coverage and fuzzing
phases, and each answer is checked three ways:

- `not_a_server_error`: no input, however odd, gets a 5xx;
- `response_schema_conformance`: every answer matches what the document says
  for its status (the 200/201 bodies, the `{"error": {"code", "message"}}`
  body of every 4xx);
- `negative_data_rejection`: what the document calls invalid is refused.

Path parameters drawn at random are mostly unknown tenants (a documented
404), so most draws use the example rules' tenants instead: the bodies then
reach the service, the turn cap and the store. Hand-written inputs the
generators never produce (an unpaired surrogate, `NaN`, a 5,000-digit
number, a body nested past Python's recursion limit, other media types) are
replayed after the generated ones.

Depth: `FUZZ_MAX_EXAMPLES` (fuzzing examples per operation; 50 by default, a
run of well under a minute) and `FUZZ_SEED` (fixed by default, so `make test`
is repeatable; `random` for a fresh draw). `make test-fuzz` runs the same test
deeper, with a fresh seed each time.
"""

from __future__ import annotations

import json
import os
import random
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pytest
import schemathesis
import schemathesis.engine
from schemathesis import BaseSchema, Case
from schemathesis.core.parameters import ParameterLocation
from schemathesis.engine import events
from schemathesis.engine.recorder import ScenarioRecorder
from schemathesis.generation.meta import TestPhase

from converse_history.api_models import CONTACT_ID_PATTERN
from memory_core.rules import TENANT_ID_PATTERN
from tests.e2e.runner_process import Runner
from tests.support.reliability import tally

GROUP = "API fuzzing (schemathesis)"
KNOWN_TENANTS = ["acme-legal", "campus-advisers", "demo"]
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "50"))
_SEED = os.environ.get("FUZZ_SEED", "20261102")
SEED = random.randrange(2**32) if _SEED == "random" else int(_SEED)
CHECKS = ["not_a_server_error", "response_schema_conformance", "negative_data_rejection"]

# The coverage phase sends each route the methods it does not serve: those
# API Gateway passes to an integration (its `ANY`), answered by the Lambda,
# and TRACE and QUERY, which the gateway refuses itself with a 405.
GATEWAY_METHODS = ["GET", "PUT", "POST", "DELETE", "OPTIONS", "PATCH", "TRACE", "QUERY"]

CONFIG: dict[str, Any] = {
    "seed": SEED,
    "workers": 1,  # the runner serves one invocation at a time, as a Lambda does
    "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
    "generation": {"mode": "all", "max-examples": MAX_EXAMPLES},
    "dictionaries": {"tenants": {"values": KNOWN_TENANTS}},
    # Four draws in five name a tenant of the rules; the fifth keeps the
    # generator's own, an unknown tenant answered 404 `unknown_tenant`.
    "parameters": {"path.tenant_id": {"dictionary": "tenants", "probability": 0.8}},
    "phases": {
        "coverage": {"unexpected-methods": GATEWAY_METHODS},
        "stateful": {"enabled": False},  # the document declares no links
    },
}


_ACCESS_LOG_LINE = re.compile(r'^127\.0\.0\.1 - "[A-Z]+ .*" [0-9]{3} ', re.MULTILINE)


def requests_served(runner: Runner) -> int:
    """Requests the runner has answered: its access log (stderr) has a line for each."""
    return len(_ACCESS_LOG_LINE.findall(runner.stderr()))


@dataclass
class FuzzRun:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def api_schema(shared_runner: Runner) -> BaseSchema:
    config = schemathesis.Config.from_dict(CONFIG)
    schema = schemathesis.openapi.from_url(f"{shared_runner.base_url}/openapi.json", config=config)
    schema.hook(map_case)
    return schema


def map_case(context: schemathesis.HookContext, case: Case[Any]) -> Case[Any]:
    """Coverage cases with valid path parameters name a tenant of the rules.

    The dictionary above feeds the fuzzing phase only; without this, every
    boundary value the coverage phase builds for a body would stop at the
    generated tenant's 404. Cases whose path parameters are the invalid part
    keep them, so their refusal is still what is checked.
    """
    meta = case.meta
    tenant = case.path_parameters.get("tenant_id")
    if (
        meta is None
        or meta.phase.name != TestPhase.COVERAGE
        or meta.is_negative_at(ParameterLocation.PATH)
        or not isinstance(tenant, str)
    ):
        return case
    contact = str(case.path_parameters.get("contact_id", ""))
    case.path_parameters["tenant_id"] = KNOWN_TENANTS[zlib.crc32(contact.encode()) % 3]
    return case


@pytest.fixture(scope="module")
def fuzz_run(shared_runner: Runner, api_schema: BaseSchema) -> FuzzRun:
    """Schemathesis' own engine (what `st run` drives): coverage, then fuzzing, every route."""
    run = FuzzRun()
    before = requests_served(shared_runner)
    for event in schemathesis.engine.from_schema(api_schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _record(run, event.recorder)
        elif isinstance(event, events.NonFatalError):
            run.errors.append(f"{event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            raise event.exception
    run.requests = requests_served(shared_runner) - before
    tally(GROUP, inputs_tried=run.requests)
    print(
        f"schemathesis (FUZZ_SEED={SEED}, FUZZ_MAX_EXAMPLES={MAX_EXAMPLES}): "
        f"{run.requests} requests, answers {sorted(run.statuses.items())}"
    )
    return run


def _record(run: FuzzRun, recorder: ScenarioRecorder) -> None:
    for interaction in recorder.interactions.values():
        if interaction.response is not None:
            run.statuses[interaction.response.status_code] += 1
    for checks in recorder.checks.values():
        for check in checks:
            if check.failure_info is None:
                continue
            failure = check.failure_info.failure
            run.failures.append(
                f"{recorder.label} [{check.name}] {failure.title}\n{failure.message}\n"
                f"    {check.failure_info.code_sample}"
            )


def test_every_route_holds_to_its_document(fuzz_run: FuzzRun) -> None:
    unique = sorted(set(fuzz_run.failures))
    assert not unique, f"{len(unique)} failures (FUZZ_SEED={SEED}):\n\n" + "\n\n".join(unique)
    assert not fuzz_run.errors, "\n".join(fuzz_run.errors)


def test_the_generated_requests_reached_the_service(fuzz_run: FuzzRun) -> None:
    """Most draws got past the tenant lookup: turns recorded, history and memory read."""
    assert fuzz_run.requests > 0
    for status in (200, 201, 404):
        assert fuzz_run.statuses[status] > 0, f"no {status} among {dict(fuzz_run.statuses)}"


def test_every_route_documents_its_answers(shared_runner: Runner, api_schema: BaseSchema) -> None:
    """Each route lists its success and every 4xx it can give, all with the error body."""
    status, headers, document = shared_runner.request("GET", "/openapi.json")
    tally(GROUP, inputs_tried=1)
    assert (status, headers["Content-Type"]) == (200, "application/json")
    assert document == api_schema.raw_schema
    base = "/v1/tenants/{tenant_id}/contacts/{contact_id}"
    expected = {
        ("post", f"{base}/converse"): {"200", "400", "403", "404", "409", "413", "415", "422"}
        | {"429"},
        ("post", f"{base}/turns"): {"201", "400", "403", "404", "409", "413", "415", "422"},
        ("get", f"{base}/memory"): {"200", "400", "403", "404"},
        ("get", f"{base}/window"): {"200", "400", "403", "404"},
        ("post", f"{base}/recall"): {"200", "400", "403", "404", "415", "429"},
        ("get", f"{base}/turns"): {"200", "400", "403", "404"},
        ("get", "/v1/tenants/{tenant_id}/contacts"): {"200", "400", "403", "404"},
        ("delete", base): {"200", "202", "400", "403", "404"},
        ("get", "/health"): {"200"},
    }
    listed = {
        (method, path): set(operation["responses"])
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    assert listed == expected
    for (method, path), statuses in listed.items():
        for status in statuses - {"200", "201", "202"}:
            content = document["paths"][path][method]["responses"][status]["content"]
            assert content["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorResponse"
            }, (method, path, status)
    # An erase that goes on asynchronously answers the erasure's body, as a finished one does.
    erase = document["paths"][base]["delete"]["responses"]
    assert erase["202"]["content"] == erase["200"]["content"]
    assert "HTTPValidationError" not in document["components"]["schemas"]


def test_the_ids_are_documented_with_what_they_accept(api_schema: BaseSchema) -> None:
    """Each route's ids carry the pattern the API holds them to, and say it in words."""
    expected = {
        "tenant_id": (TENANT_ID_PATTERN, "1 to 64 characters"),
        "contact_id": (CONTACT_ID_PATTERN, "1 to 128 characters"),
    }
    routes = [path for path in api_schema.raw_schema["paths"] if "{tenant_id}" in path]
    # converse, turns, memory, window, recall, the contact, the contacts
    assert len(routes) == 7
    for path in routes:
        for operation in api_schema.raw_schema["paths"][path].values():
            parameters = {p["name"]: p for p in operation["parameters"] if p["in"] == "path"}
            named = {name for name in expected if "{" + name + "}" in path}
            assert set(parameters) == named, path
            for name, (pattern, length) in expected.items():
                if name not in named:
                    continue
                schema = parameters[name]["schema"]
                assert schema["pattern"] == pattern, (path, name)
                assert length in parameters[name]["description"], (path, name)
                assert "control character" in parameters[name]["description"], (path, name)


# -- inputs the generators never produce ---------------------------------------------

CONVERSE = "/v1/tenants/demo/contacts/{contact}/converse"
TURNS = "/v1/tenants/demo/contacts/{contact}/turns"
TOOL_RESULT = '{{"toolResult": {{"toolUseId": "t1", "content": [{{"json": {value}}}]}}}}'


def _with_tool_json(value: str) -> str:
    return '{"message": {"content": [{"text": "hi"}, ' + TOOL_RESULT.format(value=value) + "]}}"


class OddInput(NamedTuple):
    name: str
    path: str
    content_type: str
    raw: str
    status: int
    message: str  # how the error message starts


HAND_WRITTEN = [
    OddInput(
        "unpaired surrogate in text",
        CONVERSE,
        "application/json",
        '{"message": {"text": "\\ud800"}}',
        400,
        "message.text: holds an unpaired surrogate",
    ),
    OddInput(
        "unpaired surrogate in a tool result's key",
        CONVERSE,
        "application/json",
        _with_tool_json('{"\\udfff": 1}'),
        400,
        "message.content.1.ToolResultBlock.toolResult.content.0.ToolResultJson.json",
    ),
    OddInput(
        "NaN",
        CONVERSE,
        "application/json",
        _with_tool_json('{"x": NaN}'),
        400,
        "body: not valid JSON (NaN and Infinity are not JSON)",
    ),
    OddInput(
        "a number past a double",
        CONVERSE,
        "application/json",
        _with_tool_json('{"x": 1e400}'),
        400,
        "body: not valid JSON (a number is too large)",
    ),
    OddInput(
        "a 5,000-digit integer",
        CONVERSE,
        "application/json",
        _with_tool_json('{"x": ' + "9" * 5000 + "}"),
        400,
        "body: not valid JSON (a number is too large)",
    ),
    OddInput(
        "nested past the parser's recursion limit",
        CONVERSE,
        "application/json",
        _with_tool_json("[" * 100_000 + "]" * 100_000),
        400,
        "body: not valid JSON (nested too deeply)",
    ),
    OddInput(
        "nested past what the answers can carry",
        CONVERSE,
        "application/json",
        _with_tool_json("[" * 300 + "]" * 300),
        400,
        "message.content.1.ToolResultBlock.toolResult.content.0.ToolResultJson.json",
    ),
    OddInput(
        "a tool input nested 33 levels",
        TURNS,
        "application/json",
        '{"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "n", '
        '"input": ' + '{"a": ' * 33 + "1" + "}" * 33 + "}}]}",
        400,
        "content.0.ToolUseBlock.toolUse.input",
    ),
    OddInput(
        "sentAt as epoch seconds",
        CONVERSE,
        "application/json",
        '{"message": {"text": "hi", "sentAt": 1700000000}}',
        400,
        "message.sentAt: must be an RFC 3339 date-time",
    ),
    OddInput(
        "sentAt in year 667",
        CONVERSE,
        "application/json",
        '{"message": {"text": "hi", "sentAt": "0667-09-02T00:00:00Z"}}',
        400,
        "message.sentAt: must be an RFC 3339 date-time",
    ),
    OddInput(
        "sentAt that overflows once taken to UTC",
        CONVERSE,
        "application/json",
        '{"message": {"text": "hi", "sentAt": "9999-12-31T23:59:59-01:00"}}',
        400,
        "message.sentAt: is out of range",
    ),
    OddInput(
        "a naive sentAt",
        TURNS,
        "application/json",
        '{"role": "assistant", "text": "hi", "sentAt": "2026-11-02T10:00:00"}',
        400,
        "sentAt: must carry a timezone",
    ),
    OddInput(
        "text/plain",
        CONVERSE,
        "text/plain",
        '{"message": {"text": "hi"}}',
        415,
        "Content-Type: 'text/plain'",
    ),
    OddInput(
        "a form",
        TURNS,
        "application/x-www-form-urlencoded",
        "role=assistant&text=hi",
        415,
        "Content-Type: 'application/x-www-form-urlencoded'",
    ),
    OddInput(
        "percent-encoded slash in the contact",
        CONVERSE.replace("{contact}", "a%2Fb"),
        "application/json",
        '{"message": {"text": "hi"}}',
        400,
        "contactId: ",
    ),
    OddInput(
        "percent-encoded control character in the contact",
        CONVERSE.replace("{contact}", "a%01b"),
        "application/json",
        '{"message": {"text": "hi"}}',
        400,
        "contactId: ",
    ),
    OddInput(
        "percent-encoded control character in the tenant",
        TURNS.replace("demo", "de%01mo"),
        "application/json",
        '{"role": "assistant", "text": "hi"}',
        400,
        "tenantId: ",
    ),
    OddInput(
        "an empty Content-Type",
        CONVERSE,
        "",
        '{"message": {"text": "hi"}}',
        415,
        "Content-Type: missing; the body must be application/json",
    ),
]


@pytest.mark.parametrize("odd", [pytest.param(odd, id=odd.name) for odd in HAND_WRITTEN])
def test_odd_inputs_get_a_documented_4xx_naming_the_field(
    shared_runner: Runner, api_schema: BaseSchema, odd: OddInput
) -> None:
    target = odd.path.format(contact="odd-inputs")
    answered, headers, answer = shared_runner.request(
        "POST", target, raw=odd.raw.encode(), content_type=odd.content_type
    )
    tally(GROUP, inputs_tried=1)
    status, message = odd.status, odd.message
    assert (answered, answer["error"]["message"][: len(message)]) == (status, message), answer
    assert headers["Content-Type"] == "application/json"
    route = "/v1/tenants/{tenant_id}/contacts/{contact_id}/" + target.rsplit("/", 1)[1]
    documented = api_schema.raw_schema["paths"][route]["post"]["responses"][str(status)]
    assert documented["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")
    assert set(answer) == {"error"}
    assert set(answer["error"]) == {"code", "message"}


@pytest.mark.parametrize(
    ("content_type", "contact"),
    [
        ("Application/JSON; charset=utf-8", "mixed-case-media-type"),
        ("application/json", "alice%40example.com"),
    ],
)
def test_equivalent_spellings_are_accepted(
    shared_runner: Runner, content_type: str, contact: str
) -> None:
    """Media types are case-insensitive; `%40` in a path segment is `@` (API Gateway keeps it)."""
    answered, _, answer = shared_runner.request(
        "POST",
        CONVERSE.format(contact=contact),
        raw=json.dumps({"message": {"text": "hi"}}).encode(),
        content_type=content_type,
    )
    tally(GROUP, inputs_tried=1)
    assert answered == 200, answer
    assert answer["turnCount"] == 1
