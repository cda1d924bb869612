"""`make mutation`: mutates the domain, runs the unit tests that execute each mutated line.

    PYTHONPATH=functions:. .venv/bin/python -m mutation [--module window.py ...] [--workers N]

Writes mutation/results.json and docs/mutation.md. With `--module`, only the named modules
are mutated again; the other modules' figures are kept from the results already there.
Exits non-zero when a module kills less than the target share of its non-equivalent mutants.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from mutation.equivalents import Equivalent, equivalent_for, load_equivalents
from mutation.mutants import Mutant, mutants_of
from mutation.report import TARGET_SCORE, ModuleResult, write_report
from mutation.settings import DOMAIN, HYPOTHESIS_PROFILE, REPO_ROOT, RESULTS_PATH, UNIT_TESTS
from mutation.workers import Job, Outcome, preload, run_all

# A mutant that makes its tests run this much longer than they did unmutated is looping.
TIMEOUT_FACTOR = 5
TIMEOUT_FLOOR_SECONDS = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mutation", description=__doc__)
    parser.add_argument("--module", action="append", default=[], help="e.g. window.py")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--line-map",
        type=Path,
        help="where to keep the map of tests to lines: reused when it exists (delete it after "
        "changing the tests), written there when it does not",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="print the survivors and scores; write neither results nor docs",
    )
    parser.add_argument(
        "--recount",
        action="store_true",
        help="run nothing: apply mutation/equivalent.toml as it is now to the stored results",
    )
    args = parser.parse_args(argv)
    if args.recount:
        stored = _previous_results(load_equivalents())
        write_report(stored)
        return 1 if any(r.score < TARGET_SCORE for r in stored.values()) else 0

    modules = _modules(args.module)
    line_map = _line_map(args.line_map)
    equivalents = load_equivalents()
    jobs = [
        _job(mutant, line_map)
        for module in modules
        for mutant in mutants_of(DOMAIN / module, module)
    ]
    print(f"{len(jobs)} mutants of {len(modules)} modules, {args.workers} at a time", flush=True)
    outcomes: dict[str, list[Outcome]] = defaultdict(list)
    expected = Counter(job.mutant.module for job in jobs)
    # A full run keeps no earlier figures; each module's are written as soon as it is done,
    # so an interrupted run keeps the modules it finished.
    results = _previous_results(equivalents) if args.module else {}

    def report(outcome: Outcome) -> None:
        mutant = outcome.mutant
        outcomes[mutant.module].append(outcome)
        done = sum(len(each) for each in outcomes.values())
        if outcome.verdict in ("survived", "no_tests", "error") and not equivalent_for(
            mutant, equivalents
        ):
            print(f"  {outcome.verdict}: {mutant.module}:{mutant.line} {mutant.change}", flush=True)
        if done % 50 == 0:
            print(f"{done} of {len(jobs)} mutants run", flush=True)
        if len(outcomes[mutant.module]) == expected[mutant.module]:
            finished = ModuleResult.of(mutant.module, outcomes[mutant.module], equivalents)
            results[mutant.module] = finished
            print(f"{mutant.module}: {finished.score:.1%} of non-equivalent mutants killed")
            if not args.report_only:
                write_report(results)

    preload(line_map.get("libraries", []))
    run_all(jobs, args.workers, report)
    for module in modules:
        # A module without mutants (an `__init__` that only re-exports) is never reported.
        results.setdefault(module, ModuleResult(module, mutants=0, killed=0))
    if not args.report_only:
        write_report(results)
    below = [r.module for r in results.values() if r.score < TARGET_SCORE]
    return 1 if below else 0


def _modules(named: list[str]) -> list[str]:
    every = sorted(
        str(path.relative_to(DOMAIN))
        for path in DOMAIN.rglob("*.py")
        if "__pycache__" not in path.parts
    )
    unknown = sorted(set(named) - set(every))
    if unknown:
        raise SystemExit(f"no such module of memory_core: {', '.join(unknown)}")
    # In the order named: the modules most in doubt first.
    return list(dict.fromkeys(named)) if named else every


def _line_map(kept: Path | None) -> dict[str, Any]:
    if kept is not None and kept.exists():
        return dict(json.loads(kept.read_text()))
    with tempfile.TemporaryDirectory() as scratch:
        out = kept or Path(scratch) / "line-map.json"
        print("Mapping the unit tests to the lines they execute...", flush=True)
        env = {**os.environ, "HYPOTHESIS_PROFILE": HYPOTHESIS_PROFILE}
        completed = subprocess.run(
            [sys.executable, "-m", "mutation.coverage_map", str(out)],
            env=env,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        if completed.returncode != 0:
            raise SystemExit("the unit tests fail unmutated: mutation testing needs them green")
        return dict(json.loads(out.read_text()))


def _job(mutant: Mutant, line_map: dict[str, Any]) -> Job:
    by_line: dict[str, list[str]] = line_map["tests_by_line"].get(mutant.module, {})
    durations: dict[str, float] = line_map["durations"]
    line = str(_statement_start(mutant.module, mutant.line))
    tests = {name for name in by_line.get(line, []) if name}
    if not tests and line in by_line:
        # Run only as the module was imported (a constant, a default, a field's bound): the
        # tests that run the module's code, and those of every test file that imports it,
        # may depend on it.
        tests = {name for names in by_line.values() for name in names if name}
        tests |= {name for name in durations if name.split("::")[0] in _importers(mutant.module)}
    # Named by function, not by parameters: a mutant of a constant a test is parametrized
    # with renames its cases.
    by_function: dict[str, float] = defaultdict(float)
    for name in tests:
        by_function[name.split("[", 1)[0]] += durations.get(name, 0.0)
    ordered = sorted(by_function, key=lambda name: (by_function[name], name))
    expected = sum(by_function.values())
    return Job(mutant, ordered, max(TIMEOUT_FLOOR_SECONDS, TIMEOUT_FACTOR * expected))


def _statement_start(module: str, line: int) -> int:
    """The first line of the innermost statement holding `line`: the line a test's
    coverage records for it. A table of constants spread over many lines is folded
    into one constant, so only its statement's first line is ever executed."""
    return _statement_starts(module).get(line, line)


@functools.cache
def _statement_starts(module: str) -> dict[int, int]:
    starts: dict[int, int] = {}
    tree = ast.parse((DOMAIN / module).read_text())
    # Outer statements first, so that an inner statement's lines are its own.
    for node in sorted(
        (node for node in ast.walk(tree) if isinstance(node, ast.stmt)),
        key=lambda node: (node.lineno, -(node.end_lineno or node.lineno)),
    ):
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            starts[line] = node.lineno
    return starts


@functools.cache
def _importers(module: str) -> frozenset[str]:
    """The unit test files (as pytest names them) that import the module, or its package
    for a module of `rules/`, whose names the package re-exports."""
    imported = "memory_core." + Path(module).with_suffix("").parts[0]
    named = re.compile(rf"^\s*(from|import) {re.escape(imported)}\b", re.MULTILINE)
    return frozenset(
        str(path.relative_to(REPO_ROOT))
        for path in UNIT_TESTS.rglob("test_*.py")
        if named.search(path.read_text())
    )


def _previous_results(equivalents: list[Equivalent]) -> dict[str, ModuleResult]:
    if not RESULTS_PATH.exists():
        return {}
    stored = json.loads(RESULTS_PATH.read_text())
    return {
        name: ModuleResult.from_json(name, data).recounted(equivalents)
        for name, data in stored["modules"].items()
    }


if __name__ == "__main__":
    sys.exit(main())
