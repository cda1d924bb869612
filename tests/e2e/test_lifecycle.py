"""Starting and stopping the runner: refusals at start, clean stops, runners side by side."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.e2e.runner_process import StartRunner, port_refuses_connections, write_rules


def test_a_bad_setting_fails_the_start_with_the_validators_message(start_runner: StartRunner):
    runner = start_runner(ready=False, MEMORY_FOLD_MIN_TOKENS="4000")

    exit_code = runner.wait_exit()

    assert exit_code != 0
    stderr = runner.stderr()
    assert "HISTORY_WINDOW_MAX_TOKENS (4000)" in stderr
    assert "MEMORY_FOLD_MIN_TOKENS (4000)" in stderr
    assert "listening on" not in runner.stdout()
    assert port_refuses_connections(runner.port)
    assert port_refuses_connections(runner.emulation_port()), "the emulation must be stopped"


def test_bad_rules_fail_the_start_naming_the_tenant_and_field(
    start_runner: StartRunner, tmp_path: Path
):
    rules = tmp_path / "rules.json"
    write_rules(rules, {"acme": {"historyDays": 0}})
    runner = start_runner(ready=False, RULES_FILE=str(rules))

    exit_code = runner.wait_exit()

    assert exit_code != 0
    assert "tenant 'acme', field historyDays" in runner.stderr()
    assert "listening on" not in runner.stdout()
    assert port_refuses_connections(runner.emulation_port()), "the emulation must be stopped"


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_stops_everything_with_exit_0(
    start_runner: StartRunner, stop_signal: signal.Signals
):
    runner = start_runner()
    # A request first, so the emulation holds the handler's open connections when stopped.
    assert runner.converse("demo", "contact-stop", "Hello")[0] == 200
    emulation_port = runner.emulation_port()

    exit_code = runner.stop(stop_signal)

    assert exit_code == 0, runner.stderr()
    assert f"{stop_signal.name}: stopping" in runner.stdout()
    assert port_refuses_connections(runner.port)
    assert port_refuses_connections(emulation_port)


def test_two_runners_serve_side_by_side_each_with_its_own_emulation(start_runner: StartRunner):
    first, second = start_runner(), start_runner()

    assert first.emulation_port() != second.emulation_port()
    assert first.converse("demo", "contact-1", "Hello from the first")[0] == 200
    status, answer = second.converse("demo", "contact-1", "Hello from the second")
    assert status == 200
    # Separate emulations: the second runner's table never saw the first one's turn.
    assert answer["turnCount"] == 1
    assert answer["history"] == []

    assert first.stop() == 0
    assert second.converse("demo", "contact-1", "Still here?")[0] == 200
