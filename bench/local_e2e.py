"""Converse latency through the local runner (`make run`), over HTTP: informational.

`python -m local` (what `make run` starts once installed) on a free port,
over its embedded moto, the compactor polling its queue as it does in
`make run`. Several contacts of the example rules' `demo` tenant talk in
turns (a converse call, then the agent's reply); each converse call is timed
by the client, from opening the connection to the last byte of the answer.
moto is no DynamoDB and the runner serves one invocation at a time, so these
figures describe the local runner, not AWS.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    EXAMPLE_RULES,
    FAKE_CREDENTIALS,
    REPO_ROOT,
    clean_child_environment,
    derived_rng,
    free_port,
    median,
    percentile,
    rounded,
)
from bench.conversations import conversation

TENANT = "demo"
READY_TIMEOUT_SECONDS = 90.0
STOP_TIMEOUT_SECONDS = 30.0
REQUEST_TIMEOUT_SECONDS = 30.0


def request_json(url: str, body: Any | None = None) -> tuple[int, Any]:
    """GET, or POST a JSON body; the status and the decoded answer, a refusal's included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refusal:
        return refusal.code, json.loads(refusal.read() or b"null")


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, stderr_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the local runner exited with {process.returncode}:\n"
                + stderr_path.read_text(errors="replace")[-3000:]
            )
        try:
            if request_json(f"{base_url}/health")[0] == 200:
                return
        except OSError:
            pass  # not listening yet
        time.sleep(0.1)
    raise RuntimeError(f"the local runner did not answer /health within {READY_TIMEOUT_SECONDS} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as an operator's Ctrl-C would; killed if it does not stop in time."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_SECONDS)


@dataclass(frozen=True)
class StartedRunner:
    process: subprocess.Popen[bytes]
    base_url: str
    ready_seconds: float
    """From starting the process to its first 200 on /health."""


@contextlib.contextmanager
def started_runner() -> Iterator[StartedRunner]:
    """`python -m local` on a free port with the example rules, answering; stopped on leaving."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    environment = clean_child_environment()
    environment.update(FAKE_CREDENTIALS)
    environment.update(
        {"PORT": str(port), "PYTHONPATH": "functions:.", "RULES_FILE": str(EXAMPLE_RULES)}
    )
    with tempfile.TemporaryDirectory(prefix="bench-local-") as scratch:
        stdout_path, stderr_path = Path(scratch) / "stdout.log", Path(scratch) / "stderr.log"
        with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
            started = time.perf_counter()
            process = subprocess.Popen(
                [sys.executable, "-m", "local"],
                cwd=REPO_ROOT,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
            )
        try:
            _wait_ready(process, base_url, stderr_path)
            yield StartedRunner(process, base_url, time.perf_counter() - started)
        finally:
            _stop(process)


def run(calls: int = 200, contacts: int = 10) -> dict[str, Any]:
    rounds = -(-calls // contacts)
    scripts = [conversation(derived_rng("e2e", c), 2 * rounds) for c in range(contacts)]
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    with started_runner() as runner:
        for n in range(rounds):
            for contact, script in enumerate(scripts):
                if len(latencies) == calls:
                    break
                path = f"{runner.base_url}/v1/tenants/{TENANT}/contacts/bench-{contact}"
                before = time.perf_counter()
                status, _ = request_json(
                    f"{path}/converse", {"message": {"text": script[2 * n].text}}
                )
                latencies.append((time.perf_counter() - before) * 1000)
                statuses[str(status)] = statuses.get(str(status), 0) + 1
                request_json(f"{path}/turns", {"role": "assistant", "text": script[2 * n + 1].text})
    if statuses.get("200", 0) != len(latencies):
        raise RuntimeError(f"converse calls through the local runner answered {statuses}")
    return {
        "p50_ms": rounded(percentile(latencies, 50), 1),
        "p99_ms": rounded(percentile(latencies, 99), 1),
        "mean_ms": rounded(sum(latencies) / len(latencies), 1),
        "median_ms": rounded(median(latencies), 1),
        "max_ms": rounded(max(latencies), 1),
        "calls": len(latencies),
        "contacts": contacts,
        "runner_ready_seconds": rounded(runner.ready_seconds, 2),
        "exit_code": runner.process.returncode,
    }
