"""Which unit tests execute each line of the domain, and how long each test takes.

Run in a process of its own (`python -m mutation.coverage_map OUT [TEST ...]`), so the runner never
imports the domain it mutates. Lines run while the test modules are imported (module
constants, class bodies) are recorded under the empty context.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import coverage
import pytest

from mutation.settings import DOMAIN, REPO_ROOT, UNIT_TESTS, pytest_arguments


class _TestContexts:
    """Names coverage's context after the running test, and times it."""

    def __init__(self, measurement: coverage.Coverage) -> None:
        self._measurement = measurement
        self.durations: dict[str, float] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Any:
        self._measurement.switch_context(item.nodeid)
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            self.durations[item.nodeid] = time.perf_counter() - started
            self._measurement.switch_context("")


def _libraries() -> list[str]:
    """The installed modules the tests imported: what the mutants' runs can share.

    Nothing of the repository's own (its files are outside the virtual environment), which
    may import the domain before a mutant can take its place.
    """
    venv = Path(sys.prefix).resolve()
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if (file := getattr(module, "__file__", None))
        and not _within(Path(file).resolve(), REPO_ROOT, outside=venv)
    )


def _within(path: Path, root: Path, *, outside: Path) -> bool:
    return path.is_relative_to(root) and not path.is_relative_to(outside)


def collect(out: Path, tests: list[str]) -> int:
    measurement = coverage.Coverage(source=[str(DOMAIN)], data_file=None, branch=False)
    measurement.start()
    contexts = _TestContexts(measurement)
    status = pytest.main([*pytest_arguments(), *(tests or [str(UNIT_TESTS)])], plugins=[contexts])
    measurement.stop()
    data = measurement.get_data()
    tests_by_line: dict[str, dict[int, list[str]]] = {}
    for filename in data.measured_files():
        relative = str(Path(filename).resolve().relative_to(DOMAIN.resolve()))
        lines: dict[int, set[str]] = defaultdict(set)
        for line, names in data.contexts_by_lineno(filename).items():
            lines[line].update(names)
        tests_by_line[relative] = {line: sorted(names) for line, names in lines.items()}
    out.write_text(
        json.dumps(
            {
                "status": int(status),
                "tests_by_line": tests_by_line,
                "durations": contexts.durations,
                "libraries": _libraries(),
            }
        )
    )
    return int(status)


if __name__ == "__main__":
    sys.exit(collect(Path(sys.argv[1]), sys.argv[2:]))
