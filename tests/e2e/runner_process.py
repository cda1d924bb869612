"""The local runner as an operator runs it: `python -m local` in a subprocess, over HTTP."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory_core.settings import FIELDS as SETTINGS_FIELDS

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_SECONDS = 60.0
EXIT_TIMEOUT_SECONDS = 30.0
REQUEST_TIMEOUT_SECONDS = 15.0

# What the runner reads from the environment; a test's runner sees only what it is given.
_RUNNER_VARIABLES = (
    "PORT",
    "RULES_FILE",
    "RULES_SOURCE",
    "TABLE_NAME",
    "COMPACTION_QUEUE_URL",
    "CALLER_IDENTITY",
    "AWS_ENDPOINT_URL",
    *(name.upper() for name in SETTINGS_FIELDS),
)
_EMULATION_LINE = re.compile(r"AWS emulation \(moto\) on http://127\.0\.0\.1:(\d+)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return False
    except ConnectionRefusedError:
        return True


def write_rules(path: Path, tenants: dict[str, Any]) -> None:
    """Replace the file in one step, so a reload never reads it half-written."""
    staging = path.with_suffix(".staging")
    staging.write_text(json.dumps({"tenants": tenants}), encoding="utf-8")
    staging.replace(path)


@dataclass
class Runner:
    process: subprocess.Popen[bytes]
    port: int
    stdout_path: Path
    stderr_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def emulation_port(self) -> int:
        found = _EMULATION_LINE.search(self.stdout())
        assert found, f"the runner did not say where its emulation listens:\n{self.stdout()}"
        return int(found.group(1))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict[str, str], Any]:
        """Status, headers and the decoded JSON answer (error statuses included)."""
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            # urllib would send form encoding, which Powertools parses as form fields.
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as answer:
                status, headers, payload = answer.status, dict(answer.headers), answer.read()
        except urllib.error.HTTPError as refusal:
            status, headers, payload = refusal.code, dict(refusal.headers), refusal.read()
        return status, headers, json.loads(payload) if payload else None

    def converse(self, tenant: str, contact: str, text: str) -> tuple[int, Any]:
        status, _, answer = self.request(
            "POST", f"/v1/tenants/{tenant}/contacts/{contact}/converse", {"message": {"text": text}}
        )
        return status, answer

    def reply(self, tenant: str, contact: str, text: str) -> tuple[int, Any]:
        status, _, answer = self.request(
            "POST",
            f"/v1/tenants/{tenant}/contacts/{contact}/turns",
            {"role": "assistant", "text": text},
        )
        return status, answer

    def wait_ready(self) -> None:
        """Until GET /health answers 200; fails with the runner's output if it exits first."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(
                    f"the runner exited with {self.process.returncode} before it was ready:\n"
                    f"{self.stderr()}"
                )
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.1)
        pytest.fail(f"GET /health did not answer 200 within {READY_TIMEOUT_SECONDS} s")

    def wait_exit(self) -> int:
        return self.process.wait(timeout=EXIT_TIMEOUT_SECONDS)

    def stop(self, stop_signal: signal.Signals = signal.SIGTERM) -> int:
        self.process.send_signal(stop_signal)
        return self.wait_exit()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=EXIT_TIMEOUT_SECONDS)


StartRunner = Callable[..., Runner]


def launch(output_dir: Path, **env: str) -> Runner:
    """Start `python -m local` as `make run` does; not waiting for it to be ready."""
    output_dir.mkdir(parents=True, exist_ok=True)
    port = int(env.pop("PORT", None) or free_port())
    environment = {k: v for k, v in os.environ.items() if k not in _RUNNER_VARIABLES}
    environment.update(env, PORT=str(port), PYTHONPATH="functions:.")
    stdout_path, stderr_path = output_dir / "stdout.log", output_dir / "stderr.log"
    # Files, not pipes: the handler logs a line or two per request, and a pipe
    # nobody reads would fill and block the runner.
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "local"],
            cwd=REPO_ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )
    return Runner(process, port, stdout_path, stderr_path)
