"""SIGHUP re-reads RULES_FILE; a bad reload keeps the last good rules and the runner serving."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.runner_process import Runner, StartRunner, write_rules

RELOAD_TIMEOUT_SECONDS = 15.0


def _eventually(condition: Callable[[], bool], what: str) -> None:
    # The signal is handled between two bytecodes of the runner's main thread: soon, not now.
    deadline = time.monotonic() + RELOAD_TIMEOUT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"not within {RELOAD_TIMEOUT_SECONDS} s: {what}"
        time.sleep(0.1)


def _converse_status(runner: Runner, tenant: str) -> int:
    return runner.converse(tenant, "contact-1", "Hello")[0]


def test_sighup_applies_new_rules_and_a_bad_reload_keeps_the_last_good(
    start_runner: StartRunner, tmp_path: Path
):
    rules = tmp_path / "rules.json"
    write_rules(rules, {"demo": {}})
    runner = start_runner(RULES_FILE=str(rules))
    assert _converse_status(runner, "x") == 404

    write_rules(rules, {"demo": {}, "x": {}})
    runner.process.send_signal(signal.SIGHUP)
    _eventually(lambda: _converse_status(runner, "x") == 200, "tenant x is served after SIGHUP")
    reloaded = [line for line in runner.stdout().splitlines() if "rules reloaded" in line]
    assert reloaded == [f"rules reloaded from {rules}: 2 tenants"]

    write_rules(rules, {"demo": {}, "x": {"historyDays": 0}})
    runner.process.send_signal(signal.SIGHUP)
    _eventually(
        lambda: "rules_rejected" in runner.stdout(), "the refused reload is logged by the handler"
    )
    rejection = next(line for line in runner.stdout().splitlines() if "rules_rejected" in line)
    assert "tenant 'x', field historyDays" in rejection
    assert len([line for line in runner.stdout().splitlines() if "rules reloaded" in line]) == 1
    assert runner.process.poll() is None, "a bad reload must not stop the runner"
    assert _converse_status(runner, "x") == 200
    assert _converse_status(runner, "demo") == 200
