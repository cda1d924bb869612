"""`make run`: the Lambdas' own handlers on 127.0.0.1 over an embedded AWS emulation (SPEC 9).

Start-up, in order: an in-process moto server on a free loopback port of its
own (so two runners can sit side by side), an environment that points every
AWS client at it, the table and the queues, then the handler module, whose
import validates the settings, the environment and the rules exactly as a
Lambda cold start does. A refusal there is printed and ends the process
non-zero, with the emulation stopped. Then the HTTP gateway serves in the
foreground until SIGINT or SIGTERM; SIGHUP re-reads `RULES_FILE`.

Everything started is registered on one exit stack, so whatever way the
process ends, it is stopped in reverse order: the gateway, the background
workers, the emulation. All of it runs in this process's threads, so nothing
can outlive it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import shlex
import signal
import sys
import threading
import time
import warnings
from collections.abc import MutableMapping
from pathlib import Path
from types import FrameType, ModuleType
from typing import Protocol

from local.http_gateway import LambdaGateway

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_ROOT = REPO_ROOT / "functions"
DEFAULT_RULES_FILE = REPO_ROOT / "rules.example.json"

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8000
TABLE_NAME = "conversation-memory-local"
QUEUE_NAME = "conversation-memory-compaction-local"
HANDLER_MODULE = "converse_history.handler"
COMPACTOR_MODULE = "compactor.handler"

EXIT_REFUSED_TO_START = 2
"""Bad settings, bad rules, a bad PORT: the operator has something to fix."""

STOP_POLL_SECONDS = 0.2
"""How often the main thread looks for a stop request; the bound on reacting to SIGTERM."""


class BackgroundWorker(Protocol):
    """Something that runs beside the gateway while the runner serves.

    Started before the gateway takes requests and stopped after it has
    stopped taking them, before the emulation goes away; `stop()` returns
    once the worker has finished.
    """

    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


def background_workers(
    environ: MutableMapping[str, str], invocations: threading.Lock
) -> list[BackgroundWorker]:
    """The workers to run beside the gateway: the compactor, fed from the local queue."""
    import boto3  # noqa: PLC0415 (after configure_environment, which points it at the emulation)

    from local.compaction_poller import CompactionPoller  # noqa: PLC0415 (needs functions/)

    compactor = load_handler(COMPACTOR_MODULE)
    return [
        CompactionPoller(
            boto3.client("sqs"),
            environ["COMPACTION_QUEUE_URL"],
            compactor.lambda_handler,
            invocations,
        )
    ]


class StartRefused(Exception):
    """The runner cannot start; the message says why and is all the operator sees."""


class StopSignals:
    """SIGINT and SIGTERM ask the runner to stop.

    The handler only records the request: it runs on the main thread between
    two bytecodes, where taking a lock or shutting a server down could
    deadlock with the code it interrupted. The main thread polls the flag.
    """

    def __init__(self) -> None:
        self.received: signal.Signals | None = None

    def install(self) -> None:
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, self._record)

    def wait(self) -> signal.Signals:
        while self.received is None:
            time.sleep(STOP_POLL_SECONDS)
        return self.received

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(signum)


class ServingThread:
    """The gateway's `serve_forever` on its own thread: the main thread keeps the signals."""

    name = "http-gateway"

    def __init__(self, gateway: LambdaGateway) -> None:
        self._gateway = gateway
        self._thread = threading.Thread(
            target=gateway.serve_forever,
            kwargs={"poll_interval": STOP_POLL_SECONDS},
            name=self.name,
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._gateway.shutdown()
        # Closes the socket and waits for the requests in flight (block_on_close).
        self._gateway.server_close()
        self._thread.join()


def ensure_import_paths() -> None:
    """The handlers import `adapters`, `memory_core`, ... from `functions/`, the Lambda asset root.

    `make run` sets PYTHONPATH; this makes `python -m local` work without it.
    """
    for root in (FUNCTIONS_ROOT, REPO_ROOT):
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))


def http_port(environ: MutableMapping[str, str]) -> int:
    raw = environ.get("PORT") or str(DEFAULT_PORT)
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise StartRefused(f"PORT must be a TCP port number, 0 to 65535 (got {raw!r})")
    return port


def configure_environment(environ: MutableMapping[str, str], endpoint_url: str) -> None:
    """What the handler reads at import, pointed at the emulation and nothing else.

    Whatever AWS configuration the shell carries, every client this process
    builds reaches the emulation with fake credentials: a local run never
    touches a real account.
    """
    for name in [n for n in environ if n.startswith("AWS_ENDPOINT_URL_")]:
        del environ[name]  # a per-service endpoint would win over AWS_ENDPOINT_URL
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        environ.pop(name, None)
    environ["AWS_ENDPOINT_URL"] = endpoint_url
    environ["AWS_ACCESS_KEY_ID"] = "local"
    environ["AWS_SECRET_ACCESS_KEY"] = "local"
    environ["AWS_EC2_METADATA_DISABLED"] = "true"
    _default(environ, "AWS_DEFAULT_REGION", "us-east-1")
    _default(environ, "POWERTOOLS_SERVICE_NAME", "conversation-memory-local")
    _default(environ, "POWERTOOLS_METRICS_NAMESPACE", "ConversationMemoryLocal")
    environ["POWERTOOLS_TRACE_DISABLED"] = "true"  # no X-Ray daemon to send traces to
    # One readable line a request in the terminal: the handler's warnings and errors,
    # not its INFO lines nor a metrics blob per invocation. Either is one variable away
    # (POWERTOOLS_LOG_LEVEL=INFO, POWERTOOLS_METRICS_DISABLED=false).
    _default(environ, "POWERTOOLS_LOG_LEVEL", "WARNING")
    _default(environ, "POWERTOOLS_METRICS_DISABLED", "true")
    _refuse_unless(environ, "RULES_SOURCE", "file", "the local runner reads RULES_FILE")
    environ["RULES_SOURCE"] = "file"
    _default(environ, "RULES_FILE", str(DEFAULT_RULES_FILE))
    # The local gateway authenticates nobody, so there is no caller to require (SPEC 8).
    _refuse_unless(
        environ,
        "CALLER_IDENTITY",
        "optional",
        "the local gateway authenticates no caller, so every request would be refused",
    )
    environ["CALLER_IDENTITY"] = "optional"


def _refuse_unless(
    environ: MutableMapping[str, str], name: str, honoured: str, reason: str
) -> None:
    """A setting the runner cannot honour fails the start rather than being overridden."""
    value = environ.get(name)
    if value and value != honoured:
        raise StartRefused(
            f"{name}={value} cannot be honoured locally: {reason}; "
            f"leave {name} unset or set it to {honoured}"
        )


def _default(environ: MutableMapping[str, str], name: str, value: str) -> None:
    if not environ.get(name):
        environ[name] = value


def create_resources(environ: MutableMapping[str, str]) -> None:
    """The table and the queues, created in the emulation and named in the environment."""
    import boto3  # noqa: PLC0415 (after configure_environment, which points it at the emulation)

    from local.aws_resources import create_queues, create_table  # noqa: PLC0415 (needs functions/)

    create_table(boto3.client("dynamodb"), TABLE_NAME)
    queue_url, _ = create_queues(boto3.client("sqs"), QUEUE_NAME)
    # The runner owns these: they name what it just created in its own emulation.
    environ["TABLE_NAME"] = TABLE_NAME
    environ["COMPACTION_QUEUE_URL"] = queue_url


def load_handler(module: str = HANDLER_MODULE) -> ModuleType:
    """Import a Lambda's handler: its import is the cold start, and validates everything."""
    from memory_core.rules import InvalidRules  # noqa: PLC0415 (needs functions/ on the path)
    from memory_core.settings import InvalidSettings  # noqa: PLC0415

    try:
        return importlib.import_module(module)
    except (InvalidSettings, InvalidRules) as refusal:
        raise StartRefused(str(refusal)) from None


def quiet_local_noise() -> None:
    """Keep the terminal for the service's own log lines and the gateway's access log."""
    # The emulation logs every AWS call the handler makes, several per request.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # Powertools warns on every invocation that emits no metric (each GET /health); in
    # Lambda that lands in CloudWatch Logs, here it would drown the terminal.
    warnings.filterwarnings("ignore", message="No application metrics to publish")


def sample_curl(base_url: str, handler: ModuleType) -> str:
    tenants = list(handler.RULES.current().tenants)
    if not tenants:
        return "the rules list no tenant: every converse call answers 404"
    url = f"{base_url}/v1/tenants/{tenants[0]}/contacts/contact-1/converse"
    body = '{"message": {"text": "Hello, can you help me?"}}'
    return (
        f"try: curl -s -X POST {shlex.quote(url)} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)}"
    )


def run(environ: MutableMapping[str, str], stop: StopSignals) -> int:
    port = http_port(environ)
    ensure_import_paths()
    quiet_local_noise()
    with contextlib.ExitStack() as running:
        endpoint_url = start_emulation(running)
        configure_environment(environ, endpoint_url)
        create_resources(environ)
        handler = load_handler()
        handler.RULES.install_sighup_reload(
            on_reloaded=lambda: print(
                f"rules reloaded from {environ['RULES_FILE']}: "
                f"{len(handler.RULES.current().tenants)} tenants",
                flush=True,
            )
        )
        invocations = threading.Lock()
        for worker in background_workers(environ, invocations):
            worker.start()
            running.callback(worker.stop)
        gateway = start_gateway(running, port, handler, invocations)

        print(f"rules from {environ['RULES_FILE']} (kill -HUP {os.getpid()} re-reads them)")
        print(f"listening on {gateway.url}", flush=True)
        print(f"inspector: {gateway.url}/inspect", flush=True)
        print(sample_curl(gateway.url, handler), flush=True)
        received = stop.wait()
        print(f"{received.name}: stopping", flush=True)
    return 0


def start_emulation(running: contextlib.ExitStack) -> str:
    """An in-process moto server on a port of its own; its endpoint URL."""
    from local.emulator import Emulator  # noqa: PLC0415 (slow to import; after the checks)

    # Port 0: the system picks a free port, so two runners never collide.
    emulation = Emulator(LOOPBACK, 0).start()
    running.callback(emulation.stop)
    print(f"AWS emulation (moto) on {emulation.endpoint_url}", flush=True)
    return emulation.endpoint_url


def start_gateway(
    running: contextlib.ExitStack, port: int, handler: ModuleType, invocations: threading.Lock
) -> LambdaGateway:
    def rules_tenants() -> list[str]:
        # The rules the handler serves with: RULES_FILE as parsed, and as SIGHUP reloads it.
        return list(handler.RULES.current().tenants)

    try:
        gateway = LambdaGateway(
            (LOOPBACK, port), handler.lambda_handler, invocations, inspector_tenants=rules_tenants
        )
    except OSError as error:
        raise StartRefused(f"cannot listen on {LOOPBACK}:{port}: {error.strerror}") from None
    serving = ServingThread(gateway)
    serving.start()
    running.callback(serving.stop)
    return gateway


def main() -> int:
    stop = StopSignals()
    # Before anything starts, so a stop request during start-up is not lost.
    stop.install()
    try:
        return run(os.environ, stop)
    except StartRefused as refusal:
        print(f"conversation-memory: cannot start: {refusal}", file=sys.stderr, flush=True)
        return EXIT_REFUSED_TO_START
    finally:
        # Everything is stopped by now. The interpreter's teardown collects garbage
        # over and over across moto's, boto3's and pydantic's many objects, seconds
        # of work that frees nothing the exit would not; frozen objects are skipped.
        gc.freeze()
