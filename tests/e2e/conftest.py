"""Fixtures that start the local runner; each runner started is killed at teardown.

Whatever a test did, the runners it started are killed when it ends, so none
outlives the suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.runner_process import Runner, StartRunner, launch


@pytest.fixture
def start_runner(tmp_path: Path) -> Iterator[StartRunner]:
    """Starts runners (`ready=False` to not wait for /health); kills them all at teardown."""
    started: list[Runner] = []

    def start(*, ready: bool = True, **env: str) -> Runner:
        runner = launch(tmp_path / f"runner-{len(started)}", **env)
        started.append(runner)
        if ready:
            runner.wait_ready()
        return runner

    try:
        yield start
    finally:
        for runner in started:
            runner.kill()


@pytest.fixture(scope="module")
def shared_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """One runner on the example rules, for the tests that only add their own contacts."""
    runner = launch(tmp_path_factory.mktemp("shared-runner"))
    try:
        runner.wait_ready()
        yield runner
    finally:
        runner.kill()
