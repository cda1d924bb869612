"""Runs each mutant's tests in a forked child with the mutated module in place of the real one.

The parent imports pytest and the heavy libraries the tests use once, and never the domain;
each child installs an import hook that compiles the mutant for its module, then runs the
mutant's tests with `-x` (the first failure kills it). Nothing is written to disk, so
workers cannot see each other's mutants and no stale bytecode can hide one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest

from mutation.mutants import Mutant
from mutation.settings import CONFTEST, DOMAIN, HYPOTHESIS_PROFILE, pytest_arguments

Verdict = Literal["killed", "survived", "timeout", "no_tests", "error"]
_EXIT_TESTS_FAILED = 1
_EXIT_INTERRUPTED = 2  # a collection error: the mutant broke an import


@dataclass(frozen=True)
class Job:
    mutant: Mutant
    tests: Sequence[str]
    timeout: float


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    verdict: Verdict
    seconds: float


def preload(libraries: Sequence[str]) -> None:
    """Imports, once, the installed libraries the tests use, for every child to share."""
    os.environ["HYPOTHESIS_PROFILE"] = HYPOTHESIS_PROFILE
    for name in libraries:
        try:
            importlib.import_module(name)
        except Exception:  # a library that cannot load here still loads in each child
            continue
    imported = sorted(name for name in sys.modules if name.split(".")[0] == "memory_core")
    if imported:
        # A child would run the real module, not its mutant: every verdict would be wrong.
        raise RuntimeError(f"preloading imported the domain: {', '.join(imported)}")


def run_all(jobs: Sequence[Job], workers: int, report: Callable[[Outcome], None]) -> None:
    """Runs the jobs `workers` at a time, calling `report` as each ends."""
    pending = list(reversed(jobs))
    running: dict[int, tuple[Job, float]] = {}
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop()
            if not job.tests:
                report(Outcome(job.mutant, "no_tests", 0.0))
                continue
            running[_start(job)] = (job, time.monotonic())
        if not running:
            continue
        _reap(running, report)


def _reap(running: dict[int, tuple[Job, float]], report: Callable[[Outcome], None]) -> None:
    pid, status = os.waitpid(-1, os.WNOHANG)
    now = time.monotonic()
    if pid == 0:
        for child, (job, started) in list(running.items()):
            if now - started > job.timeout:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                del running[child]
                report(Outcome(job.mutant, "timeout", now - started))
        time.sleep(0.02)
        return
    if pid not in running:
        return
    job, started = running.pop(pid)
    code = os.waitstatus_to_exitcode(status)
    verdict: Verdict = "survived" if code == 0 else "killed"
    if code not in (0, _EXIT_TESTS_FAILED, _EXIT_INTERRUPTED) and code > 0:
        # pytest's own trouble (a usage error, no tests collected) is not a failing test:
        # reported, and not counted as a kill.
        verdict = "error"
    report(Outcome(job.mutant, verdict, now - started))


def _start(job: Job) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 3
    try:
        code = _run_in_child(job)
    finally:
        os._exit(code)


def _run_in_child(job: Job) -> int:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.meta_path.insert(0, _MutantFinder(job.mutant))
    try:
        # pytest imports it before any test and stops with a usage error when it cannot:
        # imported here, a failure is the mutant's.
        importlib.import_module(CONFTEST)
    except Exception:
        return _EXIT_TESTS_FAILED
    collection = _CollectionErrors()
    code = int(
        pytest.main([*pytest_arguments(), "-x", "-p", "no:warnings", *job.tests], [collection])
    )
    # A test module that cannot be imported with the mutant leaves its tests uncollected,
    # which pytest reports as a usage error when they were named: the mutant broke them.
    return _EXIT_TESTS_FAILED if collection.failed else code


class _CollectionErrors:
    def __init__(self) -> None:
        self.failed = False

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.failed = True


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the mutant's code for its module; every other import goes on as usual."""

    def __init__(self, mutant: Mutant) -> None:
        self._mutant = mutant
        self._path = DOMAIN / mutant.module
        self._filename = str(self._path)
        parts = ["memory_core", *Path(mutant.module).with_suffix("").parts]
        self._is_package = parts[-1] == "__init__"
        self._name = ".".join(parts[:-1] if self._is_package else parts)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self._name:
            return None
        spec = ModuleSpec(fullname, self, origin=self._filename, is_package=self._is_package)
        if self._is_package:
            spec.submodule_search_locations = [str(self._path.parent)]
        spec.has_location = True
        return spec

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__file__ = self._filename
        exec(self._mutant.code(self._filename), module.__dict__)
