"""The converse Lambda's cold start: its module import vs a bare `import boto3`, and the first call.

Each sample is a fresh interpreter (`python -c`), the two kinds alternating
(the order swapping every round), timed inside the child around the import
alone, so the interpreter's own start-up is in neither. The handler's import
is everything it builds there: the settings and the environment checked, the
rules read, the Powertools objects, the DynamoDB client, the resolver and its
routes (the SQS client, the OpenAPI document and the workflow's protocol wait
for their first use). The child then makes its first converse
call (and a second), as API Gateway would send it, against a moto server
this process runs (`local/emulator.py`), so that work moved from the import
to the first call is still counted.

`profile()` explains the import: one more child imports the layers in
dependency order, then the handler with its heavy constructors wrapped in
timers (botocore clients, the OpenAPI document, the rules), and
reports where the milliseconds went.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from typing import Any

import boto3

from bench.common import (
    EXAMPLE_RULES,
    FAKE_CREDENTIALS,
    FUNCTIONS_ROOT,
    POWERTOOLS,
    REPO_ROOT,
    clean_child_environment,
    median,
    rounded,
)
from local.aws_resources import create_queues, create_table
from local.emulator import Emulator
from local.proxy_events import proxy_event

TABLE = "bench-cold-start"
QUEUE = "bench-cold-start-compaction"
TENANT = "demo"
RESULT_MARK = "BENCH_RESULT "
CHILD_TIMEOUT_SECONDS = 120

BOTO3_CHILD = """
import json, time
started = time.perf_counter()
import boto3
imported = time.perf_counter()
print("BENCH_RESULT " + json.dumps({"import_ms": (imported - started) * 1000}), flush=True)
"""

HANDLER_CHILD = """
import json, os, time
started = time.perf_counter()
import converse_history.handler as handler
imported = time.perf_counter()

class Context:
    function_name = "converse-history"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:converse-history"
    memory_limit_in_mb = 1024
    aws_request_id = "bench"
    log_group_name = "/aws/lambda/converse-history"
    log_stream_name = "bench"
    def get_remaining_time_in_millis(self):
        return 10_000

events = json.loads(os.environ["BENCH_EVENTS"])
calls = []
for event in events:
    before = time.perf_counter()
    answer = handler.lambda_handler(event, Context())
    calls.append(((time.perf_counter() - before) * 1000, answer["statusCode"]))
print("BENCH_RESULT " + json.dumps({
    "import_ms": (imported - started) * 1000,
    "calls_ms": [ms for ms, _ in calls],
    "statuses": [status for _, status in calls],
}), flush=True)
"""

PROFILE_CHILD = """
import json, time
stages = {}
mark = time.perf_counter()
def stage(name):
    global mark
    now = time.perf_counter()
    stages[name] = (now - mark) * 1000
    mark = now

import boto3
stage("import boto3")
import pydantic, pydantic.main
stage("import pydantic")
from aws_lambda_powertools import Logger, Metrics
stage("import Powertools Logger, Metrics")
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
import aws_lambda_powertools.event_handler.openapi.params
stage("import Powertools event handler and its OpenAPI models")
import memory_core.settings, memory_core.rules, memory_core.window
import adapters.dynamodb_store, adapters.rules_source, adapters.compaction_queue
import converse_history.api_models, converse_history.service, converse_history.telemetry
import converse_history.http_routes, converse_history.proxy_event
stage("import the project's modules (domain, adapters, API models)")

inside = {}
def timed(owner, name, label):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        before = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            inside[label] = inside.get(label, 0.0) + (time.perf_counter() - before) * 1000
    setattr(owner, name, wrapper)

import adapters.rules_source as rules_source
import memory_core.settings as settings
timed(boto3, "client", "botocore client (dynamodb; sqs is made by the first compaction request)")
# Built on the first GET /openapi.json; still timed, so that a document built at import shows.
timed(APIGatewayHttpResolver, "get_openapi_json_schema", "OpenAPI document")
timed(rules_source.FileRulesSource, "__init__", "rules file read and validated")
timed(settings, "load_settings", "settings validated")
before_handler = time.perf_counter()
import converse_history.handler
handler_ms = (time.perf_counter() - before_handler) * 1000
stages.update({f"handler module: {label}": ms for label, ms in inside.items()})
stages["handler module: the rest (Logger, Metrics, resolver, routes, models)"] = (
    handler_ms - sum(inside.values())
)
print("BENCH_RESULT " + json.dumps(stages), flush=True)
"""


def child_environment(endpoint_url: str | None, queue_url: str) -> dict[str, str]:
    environment = clean_child_environment()
    environment.update(FAKE_CREDENTIALS)
    environment.update(POWERTOOLS)
    environment.update(
        {
            "PYTHONPATH": str(FUNCTIONS_ROOT),
            "TABLE_NAME": TABLE,
            "COMPACTION_QUEUE_URL": queue_url,
            "RULES_SOURCE": "file",
            "RULES_FILE": str(EXAMPLE_RULES),
            "CALLER_IDENTITY": "optional",
            # Nothing written into the tree: functions/ stays without .pyc, as in Lambda.
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    if endpoint_url:
        environment["AWS_ENDPOINT_URL"] = endpoint_url
    return environment


def run_child(code: str, environment: dict[str, str]) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_SECONDS,
        check=False,
    )
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            result: dict[str, Any] = json.loads(line.removeprefix(RESULT_MARK))
            return result
    raise RuntimeError(
        f"the benchmark child failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
    )


def converse_events(contact: str) -> str:
    """Two converse calls on a new conversation, as API Gateway sends them."""
    path = f"/v1/tenants/{TENANT}/contacts/{contact}/converse"
    texts = ("Hello, I ordered two chairs last week.", "Has the second one shipped yet?")
    return json.dumps(
        [proxy_event("POST", path, json.dumps({"message": {"text": text}})) for text in texts]
    )


def warm_up(environment: dict[str, str]) -> None:
    """One untimed import of each kind, so that every timed run finds the same warm disk cache."""
    run_child(BOTO3_CHILD, environment)
    run_child(HANDLER_CHILD, {**environment, "BENCH_EVENTS": "[]"})


def run(runs: int = 21) -> dict[str, Any]:
    # The emulation's access log (one line per AWS call) is not the benchmark's output.
    access_log = logging.getLogger("werkzeug")
    level = access_log.level
    access_log.setLevel(logging.WARNING)
    emulation = Emulator().start()
    try:
        client_options = {"endpoint_url": emulation.endpoint_url, **_client_credentials()}
        create_table(boto3.client("dynamodb", **client_options), TABLE)
        queue_url, _ = create_queues(boto3.client("sqs", **client_options), QUEUE)
        environment = child_environment(emulation.endpoint_url, queue_url)
        warm_up(environment)
        handler_ms: list[float] = []
        boto3_ms: list[float] = []
        first_ms: list[float] = []
        second_ms: list[float] = []
        for n in range(runs):
            handler_environment = {**environment, "BENCH_EVENTS": converse_events(f"cold-{n}")}
            order = ("handler", "boto3") if n % 2 == 0 else ("boto3", "handler")
            for kind in order:
                if kind == "boto3":
                    boto3_ms.append(run_child(BOTO3_CHILD, environment)["import_ms"])
                    continue
                result = run_child(HANDLER_CHILD, handler_environment)
                if result["statuses"] != [200, 200]:
                    raise RuntimeError(f"the cold converse calls answered {result['statuses']}")
                handler_ms.append(result["import_ms"])
                first_ms.append(result["calls_ms"][0])
                second_ms.append(result["calls_ms"][1])
    finally:
        emulation.stop()
        access_log.setLevel(level)
    # Each round's pair ran back to back: the median of their ratios follows the machine's
    # load less than the ratio of two medians would.
    ratios = [h / b for h, b in zip(handler_ms, boto3_ms, strict=True)]
    # What the first call pays over a warm one: work the import may have put off.
    extras = [max(0.0, first - second) for first, second in zip(first_ms, second_ms, strict=True)]
    with_first_call = [
        (h + extra) / b for h, extra, b in zip(handler_ms, extras, boto3_ms, strict=True)
    ]
    return {
        "handler_ms": rounded(median(handler_ms), 1),
        "boto3_ms": rounded(median(boto3_ms), 1),
        "ratio_vs_boto3": rounded(median(ratios)),
        "ratio_of_medians": rounded(median(handler_ms) / median(boto3_ms)),
        "first_call_ms": rounded(median(first_ms), 1),
        "second_call_ms": rounded(median(second_ms), 1),
        "first_call_extra_ms": rounded(median(extras), 1),
        "ratio_with_first_call_vs_boto3": rounded(median(with_first_call)),
        "handler_plus_first_call_ms": rounded(
            median([a + b for a, b in zip(handler_ms, first_ms, strict=True)]), 1
        ),
        "runs_each": runs,
        "functions_bytecode_cached": any(FUNCTIONS_ROOT.rglob("__pycache__")),
        "handler_samples_ms": [rounded(v, 1) for v in handler_ms],
        "boto3_samples_ms": [rounded(v, 1) for v in boto3_ms],
        "first_call_samples_ms": [rounded(v, 1) for v in first_ms],
    }


def project_compile_ms(runs: int = 5) -> float:
    """Compiling the handler's own sources: every cold start pays it in Lambda.

    The Lambda asset excludes `__pycache__` (infra/service_function.py) and
    /var/task is read-only, so the project's modules are compiled from source
    at each cold start. The children here do the same unless a `__pycache__`
    was left in functions/ (results.json says: `functions_bytecode_cached`).
    """
    sources = [
        (path, path.read_text(encoding="utf-8"))
        for package in ("converse_history", "memory_core", "adapters")
        for path in sorted((FUNCTIONS_ROOT / package).rglob("*.py"))
    ]
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        for path, source in sources:
            compile(source, str(path), "exec")
        samples.append((time.perf_counter() - started) * 1000)
    return rounded(median(samples), 1)


def profile(runs: int = 3) -> dict[str, float]:
    """Where the handler's import time goes: the median of each stage over `runs` children."""
    environment = child_environment(None, "https://sqs.us-east-1.amazonaws.com/1/q")
    samples = [run_child(PROFILE_CHILD, environment) for _ in range(runs)]
    return {stage: rounded(median([s[stage] for s in samples]), 1) for stage in samples[0]}


def _client_credentials() -> dict[str, str]:
    return {
        "region_name": FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
        "aws_access_key_id": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }
