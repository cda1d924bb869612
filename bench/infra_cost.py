"""What the service costs on AWS, per million exchanges, beside AgentCore Memory.

An exchange is one converse call (the contact's message in, the bounded history
out), one recorded reply (the agent's answer, with the model's usage), and its
share of the compactions they cause. Every figure is counted on what the code
actually does, priced with `bench.prices` and nothing else.

How. One conversation goes through the real converse handler and the real
compactor under moto, driven as `bench.write_units` drives it (`exchanges`
exchanges, twenty a day, a day apart, the compactor run on its queue after each
exchange by `local.compaction_poller`, as its event source mapping would). On
the handler's and the compactor's DynamoDB clients:

- **writes**: `write_units.WriteRecorder` reads every item a request writes
  before and after it, and `write_units.bill` bills it by DynamoDB's rules (2
  units per started KB per item in a transaction, 1 otherwise; an update on the
  larger of the old and new item; index entries);
- **reads**: a `provide-client-params.dynamodb` hook sees every read request and,
  on a client without hooks, reads what DynamoDB would read for it: a Query
  again with its key condition, page limit and start key but without its
  projection or filter (DynamoDB bills the items read, not those returned),
  GetItem and BatchGetItem item by item. A Query is billed on the summed size of
  its items, rounded up to 4 KB; a GetItem or each item of a BatchGetItem on its
  own size, rounded up to 4 KB; 1 unit per 4 KB when the request asks for a
  strongly consistent read, half otherwise; at least one 4 KB step per request
  (per item for a batch), as DynamoDB charges a read that finds nothing;
- **round trips**: every request the clients send.

**Lambda**: each `lambda_handler` invocation is timed with `time.perf_counter`,
less the time spent in the hooks above; the median per kind (converse, reply,
compactor), rounded up to the millisecond as Lambda bills it, at the memory the
stack gives each function (read from `infra/*.py`), at the Arm price, plus one
request per invocation. Under moto the DynamoDB calls have no network in them
(the real ones take a few milliseconds each) and the compactor's summariser is
the offline one (a Bedrock summariser adds its wait: see
`usd_per_million_per_summariser_second`).

**API Gateway**: the converse call and the reply are two HTTP API requests,
each under 512 KB (one metered step). What the same exchange cost over a REST
API, the front door before, is `usd_per_million_exchanges_over_rest_api`.

**SQS**: the converse handler's SendMessage calls (hooked on the client its
queue makes), and the event source mapping's receives that returned messages
and its DeleteMessageBatch calls, as the run made them. The mapping's empty
polls are a fixed cost of the queue, whatever the traffic (`sqs.empty_polls`
counts the run's, not billed per exchange).

**CloudWatch Logs**: what the handlers write to stdout (Powertools' JSON log
lines and its EMF metric documents, captured per invocation), plus the lines
the stack adds to each request outside the code, sized from their formats:
Lambda's START, END and REPORT lines (with the X-Ray trace line of active
tracing), and the API stage's access-log line (`infra/api.py`'s
`ACCESS_LOG_FIELDS`). Priced as ingestion (storage, after compression, is left
out).

**Custom metrics**: every distinct (namespace, metric name, dimension names and
values) in the EMF documents the run emitted; a metric with a `tenant`
dimension is one per tenant, so `cloudwatch_usd_per_month_at_1000_tenants`
counts it a thousand times. Only what the run emitted counts: the metrics of
rarer paths (escalations, coverage gaps, failures) are not in it.

**The floor** (`wru_floor_per_exchange`): the fewest write units any design
with our guarantees pays. Each call (the converse call, the reply) must record
its turn, its idempotency marker (so that a retried call is answered, not
recorded twice) and the conversation's counters (its version, which orders
concurrent writers, and its counts), atomically: one transaction of three
items, each billed 2 units per started KB. The turn and the marker are taken
at the sizes the code wrote them (call by call); the counters as the smallest
state item that holds them (`minimal_counters_item`: the keys, `version`,
`turnsRecorded`, `unfoldedTurns`, `unfoldedTokens`). The floor of an exchange
is the floor of its converse call plus that of its reply; compaction is left
out of it (a design that never folds would pay for it in reads and prompts).

**AgentCore Memory**: its short-term memory bills each event created; an
exchange is two events (the message and the reply).
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import logging
import math
import os
import re
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from adapters.conversation_store import ConversationKey, format_instant
from adapters.dynamodb_items import MARKER_PREFIX, STATE_SK, TURN_PREFIX, Item
from bench import prices
from bench.common import REPO_ROOT, derived_rng, patched_environ
from bench.conversations import Message, conversation, corpus
from bench.dynamodb_reads import TENANT, converse, handler_under_moto
from bench.scale_day import Kind, message_length
from bench.write_units import (
    Write,
    WriteRecorder,
    bill,
    compactor_module,
    exchange_times,
    item_size,
    write_units_for,
)
from converse_history.telemetry import TENANT_DIMENSION
from local.compaction_poller import CompactionPoller
from local.proxy_events import invoke, proxy_event

KB = 1024
READ_UNIT_BYTES = 4 * KB
GB = 1024**3
PER_MILLION = 1_000_000
TENANTS = 1_000
PLOT_PATH = REPO_ROOT / "docs" / "infra-cost.png"
CONTACT = "c7a1f0e2-5b3d-4e8a-9f61-2d0c4b7e9a35"
"""A contact id of a realistic length (a UUID): it is in every key the conversation writes."""
KINDS = ("converse", "reply", "compaction")
COMPONENTS = (
    "dynamodb_writes",
    "dynamodb_reads",
    "lambda",
    "api_gateway",
    "sqs",
    "cloudwatch_logs",
)
API_REQUESTS_PER_EXCHANGE = 2
"""The converse call and the reply: both go through the HTTP API."""
INFRA = REPO_ROOT / "infra"


# -- DynamoDB's read rules -----------------------------------------------------------------


def read_units_for(size: int, *, consistent: bool, transactional: bool = False) -> float:
    """1 RRU per started 4 KB (at least one) when strongly consistent, half when eventually,
    twice that in a TransactGetItems."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    if transactional:
        return 2.0 * units
    return float(units) if consistent else units / 2


@dataclass(frozen=True)
class Read:
    """One read request: what DynamoDB reads for it, and the units it bills."""

    operation: str
    items: int
    bytes: int
    units: float
    by_item: Mapping[str, int] = field(default_factory=dict)
    """Bytes read by kind of item (`item_kind`)."""


def item_kind(item: Mapping[str, Any]) -> str:
    """`turn`, `marker`, `state`, `memory`, `fold`...: what an item is, from its sort key."""
    sort_key = str(item["SK"]["S"])
    if sort_key.startswith(TURN_PREFIX + "~"):
        return sort_key[len(TURN_PREFIX) + 1 :].lower()
    if sort_key.startswith(TURN_PREFIX):
        return "turn"
    if sort_key.startswith(MARKER_PREFIX):
        return "marker"
    return sort_key.split("#", maxsplit=1)[0].lower()


def _by_item(items: list[Mapping[str, Any]]) -> dict[str, int]:
    sizes: Counter[str] = Counter()
    for item in items:
        sizes[item_kind(item)] += item_size(item)
    return dict(sizes)


def _key_condition_only(params: Mapping[str, Any]) -> dict[str, Any]:
    """A Query's request as DynamoDB reads it: the key condition, the page's bounds, the
    consistency; no projection and no filter (both are applied after the read is billed)."""
    condition = params["KeyConditionExpression"]
    tokens = set(re.findall(r"[:#][A-Za-z0-9_]+", condition))
    request: dict[str, Any] = {
        name: params[name]
        for name in (
            "TableName",
            "IndexName",
            "KeyConditionExpression",
            "ConsistentRead",
            "ScanIndexForward",
            "Limit",
            "ExclusiveStartKey",
        )
        if name in params
    }
    names = {k: v for k, v in params.get("ExpressionAttributeNames", {}).items() if k in tokens}
    values = {k: v for k, v in params.get("ExpressionAttributeValues", {}).items() if k in tokens}
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values
    return request


def _item_by_item(
    operation: str, gets: list[tuple[str, Any, bool]], reader: Any, *, transactional: bool
) -> Read:
    """Reads billed item by item (GetItem, BatchGetItem, TransactGetItems): each item's size
    rounded up to 4 KB on its own, a key that finds nothing still billed one step."""
    found: list[Mapping[str, Any]] = []
    units = 0.0
    for table, key, consistent in gets:
        item = reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        size = item_size(item) if item else 0
        units += read_units_for(size, consistent=consistent, transactional=transactional)
        if item:
            found.append(item)
    size = sum(item_size(item) for item in found)
    return Read(operation, len(found), size, units, _by_item(found))


def billed_read(operation: str, params: Mapping[str, Any], reader: Any) -> Read | None:
    """The read `params` asks for, re-read on `reader` (a client without hooks) and billed.

    None for a request that reads nothing billed as a read (a write, a description).
    """
    if operation == "Query":
        items = reader.query(**_key_condition_only(params)).get("Items", [])
        size = sum(item_size(item) for item in items)
        consistent = bool(params.get("ConsistentRead", False))
        units = read_units_for(size, consistent=consistent)
        return Read(operation, len(items), size, units, _by_item(items))
    if operation == "GetItem":
        consistent = bool(params.get("ConsistentRead", False))
        gets = [(params["TableName"], params["Key"], consistent)]
        return _item_by_item(operation, gets, reader, transactional=False)
    if operation == "BatchGetItem":
        gets = [
            (table, key, bool(request.get("ConsistentRead", False)))
            for table, request in params["RequestItems"].items()
            for key in request["Keys"]
        ]
        return _item_by_item(operation, gets, reader, transactional=False)
    if operation == "TransactGetItems":
        gets = [
            (entry["Get"]["TableName"], entry["Get"]["Key"], True)
            for entry in params["TransactItems"]
        ]
        return _item_by_item(operation, gets, reader, transactional=True)
    return None


# -- Lambda, logs, metrics: the arithmetic ----------------------------------------------------


def gb_seconds(duration_ms: float, memory_mb: int) -> float:
    """Lambda's billed duration, rounded up to the millisecond, times the memory in GB."""
    return math.ceil(duration_ms) / 1000 * memory_mb / 1024


MetricSeries = set[tuple[str, str, tuple[tuple[str, str], ...]]]
"""Custom metrics: (namespace, name, the dimensions' names and values, sorted)."""


def metric_series(documents: Sequence[Mapping[str, Any]]) -> MetricSeries:
    """Every distinct custom metric in EMF documents: (namespace, name, dimension values).

    Each directive of a document publishes each of its metrics once per dimension set,
    with the values the document gives the dimensions' names.
    """
    series: MetricSeries = set()
    for document in documents:
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"]:
                values = tuple(sorted((name, str(document[name])) for name in dimensions))
                for metric in directive["Metrics"]:
                    series.add((str(directive["Namespace"]), str(metric["Name"]), values))
    return series


def metrics_at(
    series: MetricSeries,
    tenants: int,
    tenant_dimension: str = TENANT_DIMENSION,
) -> int:
    """How many custom metrics exist with `tenants` tenants: one per tenant for a metric
    with the tenant among its dimensions, one for any other."""
    return sum(
        tenants if any(name == tenant_dimension for name, _ in values) else 1
        for _, _, values in series
    )


def minimal_counters_item(partition: str) -> Item:
    """The smallest state item that orders writers and counts: the floor's third item."""
    return {
        "PK": {"S": partition},
        "SK": {"S": STATE_SK},
        "version": {"N": "200"},
        "turnsRecorded": {"N": "400"},
        "unfoldedTurns": {"N": "12"},
        "unfoldedTokens": {"N": "3400"},
    }


def floor_units(item_sizes: list[int]) -> int:
    """One transaction writing these items: 2 units per started KB each."""
    return sum(write_units_for(size, transactional=True) for size in item_sizes)


@dataclass(frozen=True)
class PerExchange:
    """What one exchange uses, in the units AWS bills."""

    wru: float
    rru: float
    gb_seconds: float
    lambda_requests: float
    api_requests: float
    sqs_requests: float
    log_bytes: float


def priced(use: PerExchange) -> dict[str, float]:
    """Dollars per million exchanges, by component (`bench.prices`)."""
    return {
        "dynamodb_writes": use.wru * prices.DYNAMODB_USD_PER_MILLION_WRU,
        "dynamodb_reads": use.rru * prices.DYNAMODB_USD_PER_MILLION_RRU,
        "lambda": (
            use.gb_seconds * PER_MILLION * prices.LAMBDA_USD_PER_GB_SECOND_ARM
            + use.lambda_requests * prices.LAMBDA_USD_PER_MILLION_REQUESTS
        ),
        "api_gateway": use.api_requests * prices.API_GATEWAY_HTTP_USD_PER_MILLION,
        "sqs": use.sqs_requests * prices.SQS_USD_PER_MILLION_REQUESTS,
        "cloudwatch_logs": (
            use.log_bytes * PER_MILLION / GB * prices.CLOUDWATCH_LOGS_USD_PER_GB_INGESTED
        ),
    }


def agentcore_usd_per_million() -> float:
    return (
        prices.AGENTCORE_EVENTS_PER_EXCHANGE
        * PER_MILLION
        / 1000
        * prices.AGENTCORE_MEMORY_USD_PER_THOUSAND_EVENTS
    )


# -- the stack's settings, read from infra/ without synthesising it ----------------------------


def _service_function_calls(path: Path) -> Iterator[ast.Call]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ServiceFunction":
            yield node


def _default_memory_mb() -> int:
    tree = ast.parse((INFRA / "service_function.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            arguments = node.args.kwonlyargs
            for argument, default in zip(arguments, node.args.kw_defaults, strict=True):
                if argument.arg == "memory_mb" and isinstance(default, ast.Constant):
                    return _an_int(default.value, "service_function.py")
    raise LookupError("infra/service_function.py: no default memory_mb")


def _an_int(value: object, where: str) -> int:
    if not isinstance(value, int):
        raise LookupError(f"infra/{where}: memory_mb is not a number of MB")
    return value


def stack_memory_mb(module: str) -> int:
    """The `memory_mb` the stack gives the ServiceFunction built in `infra/<module>.py`."""
    [call] = _service_function_calls(INFRA / f"{module}.py")
    for keyword in call.keywords:
        if keyword.arg == "memory_mb":
            if not isinstance(keyword.value, ast.Constant):
                raise LookupError(f"infra/{module}.py: memory_mb is not a literal")
            return _an_int(keyword.value.value, f"{module}.py")
    return _default_memory_mb()


def infra_constant(module: str, name: str) -> Any:
    """A module-level literal of `infra/<module>.py`, read without importing CDK."""
    tree = ast.parse((INFRA / f"{module}.py").read_text())
    for node in tree.body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if (
            isinstance(target, ast.Name)
            and target.id == name
            and isinstance(node, ast.AnnAssign | ast.Assign)
            and node.value is not None
        ):
            return ast.literal_eval(node.value)
    raise LookupError(f"infra/{module}.py: no {name}")


def compactor_service() -> str:
    """The compactor's POWERTOOLS_SERVICE_NAME, its metrics' `service` dimension."""
    return str(infra_constant("service_function", "COMPACTOR_SERVICE"))


# -- the lines the stack logs outside the code --------------------------------------------------


def access_log_fields() -> tuple[tuple[str, str], ...]:
    """The stage's access-log fields and their `$context` sources (`infra/api.py`)."""
    fields = infra_constant("api", "ACCESS_LOG_FIELDS")
    return tuple((str(name), str(source)) for name, source in fields)


ACCESS_LOG_EXAMPLE_VALUES = {
    "$context.requestId": "Ab1Cd2Ef3Gh4Ij5=",
    "$context.identity.sourceIp": "203.0.113.101",
    "$context.identity.userArn": (
        "arn:aws:sts::123456789012:assumed-role/agent-runtime-role/agent-session"
    ),
    "$context.requestTime": "01/Dec/2026:10:15:30 +0000",
    "$context.protocol": "HTTP/1.1",
    "$context.integrationErrorMessage": "-",
}
"""Values of a realistic length for the access log's fields (an IAM-signed caller: the
routes that take data require one)."""


def access_log_line(route_key: str, status: int, response_length: int) -> str:
    """The API stage's access-log line for one request."""
    method = route_key.split(" ", 1)[0]
    values = {
        **ACCESS_LOG_EXAMPLE_VALUES,
        "$context.httpMethod": method,
        "$context.routeKey": route_key,
        "$context.status": str(status),
        "$context.responseLength": str(response_length),
    }
    return json.dumps(
        {name: values[source] for name, source in access_log_fields()}, separators=(",", ":")
    )


def lambda_platform_lines(duration_ms: float, memory_mb: int) -> list[str]:
    """Lambda's own log events for one invocation (text format), with active tracing."""
    request = str(uuid.UUID(int=0))
    return [
        f"START RequestId: {request} Version: 12",
        f"END RequestId: {request}",
        f"REPORT RequestId: {request}\tDuration: {duration_ms:.2f} ms\t"
        f"Billed Duration: {math.ceil(duration_ms)} ms\tMemory Size: {memory_mb} MB\t"
        "Max Memory Used: 118 MB\t\n"
        "XRAY TraceId: 1-674c2b5e-0f9a3c1d2e4b5a6978c1d2e3\tSegmentId: 1a2b3c4d5e6f7a8b\t"
        "Sampled: true\t",
    ]


def utf8(lines: list[str]) -> int:
    return sum(len(line.encode()) for line in lines)


# -- the meter ----------------------------------------------------------------------------------


class _Capture(io.TextIOBase):
    """A stdout that keeps what is written, until taken."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def take(self) -> list[str]:
        text, self._parts = "".join(self._parts), []
        return [line for line in text.splitlines() if line.strip()]


@dataclass
class Invocation:
    kind: str
    ms: float
    emf: list[str]
    lines: list[str]
    response_length: int | None


@dataclass
class Meter:
    """Everything the run's clients and handlers did, by kind of call and call number."""

    writes: WriteRecorder
    reader: Any
    phase: str = "setup"
    call: int = 0
    requests: list[tuple[str, int, str]] = field(default_factory=list)
    reads: list[tuple[str, int, Read]] = field(default_factory=list)
    sqs: Counter[str] = field(default_factory=Counter)
    invocations: list[Invocation] = field(default_factory=list)
    hook_seconds: float = 0.0
    capture: _Capture = field(default_factory=_Capture)

    def start(self, phase: str) -> None:
        self.phase = phase
        self.call += 1
        self.writes.start(phase)

    def _timed(self, hook: Callable[..., None]) -> Callable[..., None]:
        def timed(**kwargs: Any) -> None:
            started = time.perf_counter()
            try:
                hook(**kwargs)
            finally:
                self.hook_seconds += time.perf_counter() - started

        return timed

    def attach_dynamodb(self, client: Any) -> None:
        events = client.meta.events
        events.register("provide-client-params.dynamodb", self._timed(self.writes._before_call))
        events.register("after-call.dynamodb", self._timed(self.writes._after_call))
        events.register("provide-client-params.dynamodb", self._timed(self._before_request))

    def _before_request(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        operation = str(model.name)
        self.requests.append((self.phase, self.call, operation))
        read = billed_read(operation, params, self.reader)
        if read is not None:
            self.reads.append((self.phase, self.call, read))

    def attach_sqs(self, client: Any) -> Any:
        client.meta.events.register("after-call.sqs", self._timed(self._after_sqs))
        return client

    def _after_sqs(self, model: Any, parsed: Mapping[str, Any], **_: Any) -> None:
        operation = str(model.name)
        if operation == "ReceiveMessage" and not parsed.get("Messages"):
            operation = "ReceiveMessage (empty)"
        self.sqs[operation] += 1

    def timed_handler(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """The handler, timed (less the hooks' time), its stdout kept, call by call, under
        the kind of call being made (`start`)."""

        def invocation(event: Any, context: Any) -> Any:
            hooks, started = self.hook_seconds, time.perf_counter()
            answer = handler(event, context)
            seconds = time.perf_counter() - started - (self.hook_seconds - hooks)
            lines = self.capture.take()
            emf = [line for line in lines if line.startswith('{"_aws"')]
            body = answer.get("body") if isinstance(answer, dict) else None
            self.invocations.append(
                Invocation(
                    self.phase,
                    seconds * 1000,
                    emf,
                    [line for line in lines if not line.startswith('{"_aws"')],
                    len(body.encode()) if isinstance(body, str) else None,
                )
            )
            return answer

        return invocation


# -- the conversation ---------------------------------------------------------------------------


def reply_with_usage(
    handler: ModuleType, contact: str, text: str, sent_at: datetime, usage: dict[str, int]
) -> None:
    body = {"role": "assistant", "text": text, "sentAt": format_instant(sent_at), "usage": usage}
    path = f"/v1/tenants/{TENANT}/contacts/{contact}/turns"
    status, _, answer = invoke(handler.lambda_handler, proxy_event("POST", path, json.dumps(body)))
    if status != 201:
        raise RuntimeError(f"reply answered {status}: {answer}")


def model_usage(rng: Any) -> dict[str, int]:
    """Bedrock's usage for an agent's reply: a cached system prompt and history, a short answer."""
    usage = {
        "inputTokens": rng.randint(150, 900),
        "cacheReadInputTokens": rng.randint(1_500, 4_000),
        "cacheWriteInputTokens": rng.randint(0, 400),
        "outputTokens": rng.randint(40, 400),
    }
    usage["totalTokens"] = sum(usage.values())
    return usage


MESSAGE_SIZES = ("chat", "long")
"""`chat`: a chat agent's exchanges, as `scale_day` draws them (the contact's message a
median of 110 characters, now and then a paragraph or a pasted document; the agent's
reply a median of 700). `long`: the benchmarks' long messages (80 to 20,000 characters,
weighted 5:3:1), the heavy end of what the service stores."""


def messages_of(sizes: str, count: int) -> list[Message]:
    """`count` messages, the contact's and the agent's in turn, of the named sizes."""
    rng = derived_rng("infra-cost", sizes)
    if sizes == "long":
        return conversation(rng, count)
    source = corpus(rng)
    found = []
    for n in range(count):
        kind = Kind.CONTACT if n % 2 == 0 else Kind.AGENT
        size = min(message_length(rng, kind), len(source) - 1)
        start = rng.randrange(0, len(source) - size)
        found.append(Message("user" if n % 2 == 0 else "assistant", source[start : start + size]))
    return found


def record(exchanges: int, sizes: str = "chat") -> Meter:
    """The conversation through the handler and the compactor, every request metered."""
    messages = messages_of(sizes, 2 * exchanges)
    usage_rng = derived_rng("infra-cost", "usage")
    now = datetime.now(UTC).replace(microsecond=0)
    capture = _Capture()
    with handler_under_moto() as (handler, dynamodb, sqs), contextlib.redirect_stdout(capture):
        # The handler's logger was made while stdout went nowhere: send it here too.
        _log_to(handler.logger.registered_handler, capture)
        with _metered_compactor_import(capture) as compactor:
            meter = Meter(writes=WriteRecorder(reader=dynamodb), reader=dynamodb, capture=capture)
            meter.attach_dynamodb(handler.SERVICE._store._client)
            meter.attach_dynamodb(compactor.STORE._client)
            make_sqs = handler.QUEUE._make_client
            handler.QUEUE._make_client = lambda: meter.attach_sqs(make_sqs())
            meter.attach_sqs(sqs)
            # `converse` and `reply_with_usage` call the module's `lambda_handler`: timed.
            timed = meter.timed_handler(handler.lambda_handler)
            setattr(handler, "lambda_handler", timed)  # noqa: B010 (a module's attribute)
            poller = CompactionPoller(
                sqs,
                os.environ["COMPACTION_QUEUE_URL"],
                meter.timed_handler(compactor.lambda_handler),
                threading.Lock(),
            )
            for n, sent_at in enumerate(exchange_times(exchanges, now)):
                meter.start("converse")
                converse(handler, CONTACT, messages[2 * n].text, sent_at)
                meter.start("reply")
                reply_with_usage(
                    handler,
                    CONTACT,
                    messages[2 * n + 1].text,
                    sent_at + timedelta(minutes=1),
                    model_usage(usage_rng),
                )
                meter.start("compaction")
                while poller.poll_once():
                    pass
    return meter


def _log_to(handler: logging.StreamHandler[Any], stream: Any) -> None:
    """The handler's stream replaced without flushing the old one, which an earlier
    capture (pytest's, a previous run's) may have closed."""
    with handler.lock or contextlib.nullcontext():
        handler.stream = stream


@contextlib.contextmanager
def _metered_compactor_import(capture: _Capture) -> Iterator[ModuleType]:
    """The compactor imported under its own service name (its metrics' `service`), logging here."""
    with contextlib.ExitStack() as stack:
        with patched_environ({"POWERTOOLS_SERVICE_NAME": compactor_service()}):
            compactor = stack.enter_context(compactor_module())
        _log_to(compactor.logger.registered_handler, capture)
        yield compactor


# -- the figure ---------------------------------------------------------------------------------


def _per_call(entries: list[tuple[str, int, float]], phase: str) -> dict[int, float]:
    totals: dict[int, float] = {}
    for kind, call, value in entries:
        if kind == phase:
            totals[call] = totals.get(call, 0) + value
    return totals


def _is_turn(item: Item) -> bool:
    sort_key = str(item["SK"]["S"])
    return sort_key.startswith(TURN_PREFIX) and not sort_key.startswith(TURN_PREFIX + "~")


def _floor_per_call(writes: list[tuple[str, int, Write]], phase: str, counters: int) -> list[int]:
    """Each call's floor: its turn and marker at the sizes written, and the counters."""
    turns: dict[int, int] = {}
    markers: dict[int, int] = {}
    for kind, call, write in writes:
        if kind != phase or write.after is None:
            continue
        if _is_turn(write.after):
            turns[call] = item_size(write.after)
        elif str(write.after["SK"]["S"]).startswith(MARKER_PREFIX):
            markers[call] = item_size(write.after)
    return [floor_units([turns[call], markers.get(call, 0), counters]) for call in sorted(turns)]


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _series_names(series: MetricSeries, per_tenant: bool) -> list[str]:
    return sorted(
        {
            name
            for _, name, values in series
            if any(dimension == TENANT_DIMENSION for dimension, _ in values) == per_tenant
        }
    )


def figures(meter: Meter, exchanges: int) -> dict[str, Any]:
    """The section of results.json, from what the run metered."""
    memory = {"api": stack_memory_mb("converse"), "compaction": stack_memory_mb("compaction")}
    by_kind = {kind: [i for i in meter.invocations if i.kind == kind] for kind in KINDS}
    compactions = len(by_kind["compaction"])
    median_ms = {kind: round(_median([i.ms for i in by_kind[kind]]), 3) for kind in KINDS}

    wru = {
        kind: sum(bill(w).total for phase, _, w in meter.writes.writes if phase == kind)
        for kind in KINDS
    }
    rru = {kind: sum(r.units for phase, _, r in meter.reads if phase == kind) for kind in KINDS}
    all_wru = sum(bill(w).total for _, _, w in meter.writes.writes)
    all_rru = sum(r.units for _, _, r in meter.reads)

    round_trips = {
        kind: _per_call([(p, c, 1.0) for p, c, _ in meter.requests], kind) for kind in KINDS
    }
    operations: dict[str, Counter[str]] = {
        kind: Counter(
            " ".join(op for p, c, op in meter.requests if p == kind and c == call)
            for call in round_trips[kind]
        )
        for kind in KINDS
    }
    wru_by_item: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for phase, _, write in meter.writes.writes:
        image = write.after or write.before
        if phase in wru_by_item and image is not None:
            wru_by_item[phase][item_kind(image)] += bill(write).total
    read_by_item: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
    for phase, _, read in meter.reads:
        if phase in read_by_item:
            read_by_item[phase].update(read.by_item)
    items_read = _per_call([(p, c, float(r.items)) for p, c, r in meter.reads], "converse")
    bytes_read = _per_call([(p, c, float(r.bytes)) for p, c, r in meter.reads], "converse")

    partition = ConversationKey(TENANT, CONTACT).partition
    counters = item_size(minimal_counters_item(partition))
    floors = [
        *_floor_per_call(meter.writes.writes, "converse", counters),
        *_floor_per_call(meter.writes.writes, "reply", counters),
    ]

    sends = meter.sqs["SendMessage"]
    batch_requests = (
        meter.sqs["ReceiveMessage"] + meter.sqs["DeleteMessageBatch"] + meter.sqs["DeleteMessage"]
    )

    def memory_of(kind: str) -> int:
        return memory["compaction" if kind == "compaction" else "api"]

    emf_bytes = sum(utf8(i.emf) for i in meter.invocations)
    line_bytes = sum(utf8(i.lines) for i in meter.invocations)
    platform_bytes = sum(
        utf8(lambda_platform_lines(i.ms, memory_of(i.kind))) for i in meter.invocations
    )
    access_bytes = sum(
        len(
            access_log_line(
                "POST /v1/tenants/{tenantId}/contacts/{contactId}/"
                + ("converse" if i.kind == "converse" else "turns"),
                200 if i.kind == "converse" else 201,
                i.response_length or 0,
            ).encode()
        )
        for i in meter.invocations
        if i.kind in ("converse", "reply")
    )
    log_bytes = emf_bytes + line_bytes + platform_bytes + access_bytes

    documents = [json.loads(line) for i in meter.invocations for line in i.emf]
    series = metric_series(documents)
    metrics_at_tenants = metrics_at(series, TENANTS)

    compactions_per_exchange = compactions / exchanges
    use = PerExchange(
        wru=all_wru / exchanges,
        rru=all_rru / exchanges,
        gb_seconds=(
            gb_seconds(median_ms["converse"], memory["api"])
            + gb_seconds(median_ms["reply"], memory["api"])
            + compactions_per_exchange * gb_seconds(median_ms["compaction"], memory["compaction"])
        ),
        lambda_requests=2 + compactions_per_exchange,
        api_requests=API_REQUESTS_PER_EXCHANGE,
        sqs_requests=(sends + batch_requests) / exchanges,
        log_bytes=log_bytes / exchanges,
    )
    components = priced(use)
    total = sum(components.values())
    agentcore = agentcore_usd_per_million()
    return {
        "exchanges": exchanges,
        "compactions": compactions,
        "usd_per_million_exchanges": round(total, 2),
        # Agents inside AWS invoke the function directly (`MemoryClient.over_lambda`, the
        # workflow): no API Gateway request.
        "usd_per_million_exchanges_direct": round(total - components["api_gateway"], 2),
        # The same exchange through a REST API: why the front door is an HTTP API.
        "usd_per_million_exchanges_over_rest_api": round(
            total
            - components["api_gateway"]
            + use.api_requests * prices.API_GATEWAY_REST_USD_PER_MILLION,
            2,
        ),
        "components_usd_per_million": {name: round(components[name], 3) for name in COMPONENTS},
        "agentcore_memory_usd_per_million": round(agentcore, 2),
        "vs_agentcore_memory": round(agentcore / total, 2),
        "wru_per_exchange": round(use.wru, 3),
        "wru_by_kind": {
            "converse": round(wru["converse"] / exchanges, 3),
            "reply": round(wru["reply"] / exchanges, 3),
            "per_compaction": round(wru["compaction"] / compactions, 3) if compactions else 0.0,
            "compaction_per_exchange": round(wru["compaction"] / exchanges, 3),
        },
        "wru_per_exchange_by_item": {
            kind: {item: round(units / exchanges, 3) for item, units in sorted(counts.items())}
            for kind, counts in wru_by_item.items()
        },
        "bytes_read_per_call_by_item": {
            "converse": {
                item: round(size / exchanges)
                for item, size in sorted(read_by_item["converse"].items())
            },
            "compaction": {
                item: round(size / compactions) if compactions else 0
                for item, size in sorted(read_by_item["compaction"].items())
            },
        },
        "wru_floor_per_exchange": round(sum(floors) / exchanges, 3),
        "wru_over_floor": round(use.wru / (sum(floors) / exchanges), 2) if floors else None,
        "floor_items_bytes": {
            "counters": counters,
            "calls_floored": len(floors),
        },
        "rru_per_exchange": round(use.rru, 3),
        "rru_by_kind": {
            "converse": round(rru["converse"] / exchanges, 3),
            "reply": round(rru["reply"] / exchanges, 3),
            "per_compaction": round(rru["compaction"] / compactions, 3) if compactions else 0.0,
            "compaction_per_exchange": round(rru["compaction"] / exchanges, 3),
        },
        "round_trips_per_converse": _median(list(round_trips["converse"].values())),
        "round_trips_median": {
            kind: _median(list(round_trips[kind].values())) for kind in ("reply", "compaction")
        },
        "operations": {kind: dict(operations[kind].most_common(3)) for kind in KINDS},
        "items_read_per_converse": round(sum(items_read.values()) / len(items_read), 3)
        if items_read
        else 0.0,
        "items_read_per_converse_max": max(items_read.values(), default=0),
        "bytes_read_per_converse_median": _median(list(bytes_read.values())),
        "write_requests": meter.writes.requests,
        "refused_write_requests": meter.writes.refused,
        "lambda": {
            "memory_mb": {"converse_history": memory["api"], "compactor": memory["compaction"]},
            "median_ms": median_ms,
            "gb_seconds_per_exchange": round(use.gb_seconds, 6),
            "invocations_per_exchange": round(use.lambda_requests, 3),
            "usd_per_million_per_summariser_second": round(
                compactions_per_exchange
                * memory["compaction"]
                / 1024
                * PER_MILLION
                * prices.LAMBDA_USD_PER_GB_SECOND_ARM,
                3,
            ),
        },
        "api_gateway_requests_per_exchange": API_REQUESTS_PER_EXCHANGE,
        "sqs": {
            "requests_per_exchange": round(use.sqs_requests, 3),
            "send_message": sends,
            "receive_message": meter.sqs["ReceiveMessage"],
            "delete_message_batch": meter.sqs["DeleteMessageBatch"] + meter.sqs["DeleteMessage"],
            "empty_polls": meter.sqs["ReceiveMessage (empty)"],
        },
        "log_bytes_per_exchange": {
            "emf": round(emf_bytes / exchanges, 1),
            "log_lines": round(line_bytes / exchanges, 1),
            "lambda_platform": round(platform_bytes / exchanges, 1),
            "api_access": round(access_bytes / exchanges, 1),
            "total": round(log_bytes / exchanges, 1),
        },
        "log_lines_per_exchange": round(
            sum(len(i.lines) for i in meter.invocations) / exchanges, 3
        ),
        "emf_documents_per_exchange": round(len(documents) / exchanges, 3),
        "custom_metrics": {
            "one_tenant": metrics_at(series, 1),
            "at_1000_tenants": metrics_at_tenants,
            "per_tenant": _series_names(series, per_tenant=True),
            "shared": _series_names(series, per_tenant=False),
        },
        "cloudwatch_usd_per_month_at_1000_tenants": round(
            metrics_at_tenants * prices.CLOUDWATCH_USD_PER_METRIC_MONTH, 2
        ),
        "prices": prices.as_json(),
    }


def run(exchanges: int = 200) -> dict[str, Any]:
    """`infra_cost` in results.json: one conversation's AWS bill, per million exchanges, for
    a chat agent's messages; the same for long messages under `long_messages`."""
    chat = figures(record(exchanges, "chat"), exchanges)
    long = figures(record(exchanges, "long"), exchanges)
    chat["message_sizes"] = "chat"
    chat["long_messages"] = {key: long[key] for key in LONG_MESSAGE_FIGURES}
    return chat


LONG_MESSAGE_FIGURES = (
    "usd_per_million_exchanges",
    "usd_per_million_exchanges_direct",
    "usd_per_million_exchanges_over_rest_api",
    "components_usd_per_million",
    "vs_agentcore_memory",
    "wru_per_exchange",
    "wru_floor_per_exchange",
    "wru_over_floor",
    "rru_per_exchange",
    "compactions",
)


# -- the plot -----------------------------------------------------------------------------------

_LABELS = {
    "dynamodb_writes": "DynamoDB writes",
    "dynamodb_reads": "DynamoDB reads",
    "lambda": "Lambda",
    "api_gateway": "API Gateway (HTTP API)",
    "sqs": "SQS",
    "cloudwatch_logs": "CloudWatch Logs",
}


def plot(figures: dict[str, Any], path: Path = PLOT_PATH) -> Path:
    """Dollars per million exchanges, stacked by component, beside AgentCore Memory's (left);
    the same stack on its own scale (right)."""
    import matplotlib  # noqa: PLC0415 (only `make bench` plots)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    components = figures["components_usd_per_million"]
    agentcore = figures["agentcore_memory_usd_per_million"]
    total = figures["usd_per_million_exchanges"]
    colours = [f"C{n}" for n in range(len(COMPONENTS))]
    figure, (side_by_side, ours) = plt.subplots(
        1, 2, figsize=(9, 4.8), dpi=120, gridspec_kw={"width_ratios": [3, 2]}
    )
    for axes, x in ((side_by_side, 0), (ours, 0)):
        bottom = 0.0
        for colour, name in zip(colours, COMPONENTS, strict=False):
            value = components[name]
            label = f"{_LABELS[name]}: \\${value:,.2f}" if axes is ours else None
            axes.bar(x, value, bottom=bottom, width=0.6, color=colour, label=label)
            bottom += value
        axes.text(x, total, f"\\${total:,.2f}", ha="center", va="bottom", fontsize=9)
        axes.grid(True, axis="y", alpha=0.3)
    side_by_side.bar(1, agentcore, width=0.6, color="0.6")
    side_by_side.text(1, agentcore, f"\\${agentcore:,.0f}", ha="center", va="bottom", fontsize=9)
    side_by_side.set_xticks([0, 1], ["this service", "AgentCore Memory\n(2 events an exchange)"])
    side_by_side.set_xlim(-0.7, 1.7)
    side_by_side.set_ylim(0, agentcore * 1.12)
    side_by_side.set_ylabel("US dollars per million exchanges")
    ours.set_xticks([0], ["this service, by component"])
    ours.set_xlim(-0.6, 0.6)
    ours.set_ylim(0, total * 2.2)
    ours.legend(loc="upper center", fontsize=8)
    prices_note = f"{figures['prices']['region']}, list prices of {figures['prices']['as_of']}"
    figure.suptitle(
        f"AWS cost per million exchanges ({prices_note}):\n"
        f"\\${total:,.2f} against AgentCore Memory's \\${agentcore:,.0f}, "
        f"{figures['vs_agentcore_memory']:.1f}x less",
        fontsize=10,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
    return path
