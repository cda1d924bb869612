"""mutation/results.json and docs/mutation.md from the mutants' verdicts."""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mutation.equivalents import Equivalent, equivalent_for
from mutation.settings import REPORT_PATH, RESULTS_PATH
from mutation.workers import Outcome

TARGET_SCORE = 0.97


@dataclass
class ModuleResult:
    module: str
    mutants: int
    killed: int
    equivalent: list[dict[str, Any]] = field(default_factory=list)
    survived: list[dict[str, Any]] = field(default_factory=list)

    @property
    def score(self) -> float:
        """The share of the mutants that can change behaviour which a test catches."""
        meaningful = self.mutants - len(self.equivalent)
        return self.killed / meaningful if meaningful else 1.0

    @classmethod
    def of(
        cls, module: str, outcomes: Iterable[Outcome], equivalents: list[Equivalent]
    ) -> ModuleResult:
        result = cls(module, mutants=0, killed=0)
        for outcome in sorted(outcomes, key=lambda o: o.mutant.index):
            mutant = outcome.mutant
            result.mutants += 1
            where = {"line": mutant.line, "code": mutant.line_text, "change": mutant.change}
            if outcome.verdict in ("killed", "timeout"):
                result.killed += 1
            elif (entry := equivalent_for(mutant, equivalents)) is not None:
                result.equivalent.append({**where, "reason": entry.reason})
            else:
                survivor = {**where, "tested": outcome.verdict != "no_tests"}
                if outcome.verdict == "error":
                    survivor["error"] = True
                result.survived.append(survivor)
        return result

    def recounted(self, equivalents: list[Equivalent]) -> ModuleResult:
        """The same verdicts with the equivalences as they are now: a survivor an entry now
        explains is equivalent, an equivalent one whose entry is gone survives again."""
        uncounted = [
            {key: value for key, value in entry.items() if key != "reason"} | {"tested": True}
            for entry in self.equivalent
        ]
        equivalent, survived = [], []
        for entry in [*uncounted, *self.survived]:
            match = next(
                (
                    e
                    for e in equivalents
                    if e.matches_text(self.module, entry["code"], entry["change"])
                ),
                None,
            )
            if match is None:
                survived.append(entry)
            else:
                kept = {key: entry[key] for key in ("line", "code", "change")}
                equivalent.append({**kept, "reason": match.reason})
        by_line = operator.itemgetter("line")
        return ModuleResult(
            self.module,
            self.mutants,
            self.killed,
            sorted(equivalent, key=by_line),
            sorted(survived, key=by_line),
        )

    @classmethod
    def from_json(cls, module: str, data: dict[str, Any]) -> ModuleResult:
        return cls(
            module,
            mutants=data["mutants"],
            killed=data["killed"],
            equivalent=data["equivalent_mutants"],
            survived=data["surviving_mutants"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mutants": self.mutants,
            "killed": self.killed,
            "equivalent": len(self.equivalent),
            "survived": len(self.survived),
            "score": round(self.score, 4),
            "equivalent_mutants": self.equivalent,
            "surviving_mutants": self.survived,
        }


def write_report(results: dict[str, ModuleResult]) -> None:
    ordered = dict(sorted(results.items()))
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    RESULTS_PATH.write_text(
        json.dumps(
            {
                "date": stamp,
                "target_score": TARGET_SCORE,
                "modules": {name: result.to_json() for name, result in ordered.items()},
            },
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )
    REPORT_PATH.write_text(_markdown(ordered, stamp))


_INTRO = """# Mutation testing of the domain

`make mutation` changes `functions/memory_core/` one small step at a time and runs, for each
change (a *mutant*), the unit tests that execute its line (`mutation/`). A mutant is
*killed* when one of them fails or it makes them loop; it *survives* when they all pass.
A surviving mutant is either a gap in the tests, which a new test closes, or *equivalent*:
a change no input can observe, listed below with the reason (`mutation/equivalent.toml`).

The changes: a comparison's boundary or sense (`<` and `<=`, `==` and `!=`, `in` and
`not in`, `is` and `is not`); arithmetic (`+` and `-`, `*` and `//`, `/` to `*`, `%` to
`//`, `|` and `&`), in augmented assignments too; a number one more and one less; a boolean
flipped; `and` and `or` swapped; a condition negated (`if`, `while`, a conditional
expression, a comprehension's filter) or its `not` removed; a unary minus removed; a
returned value replaced by `None`. Docstrings, annotations, decorators and strings are left
alone. A line run only as its module is imported (a constant, a default, a field's bound)
is tested by every test that runs the module and every test file that imports it.
Hypothesis runs derandomised with no example database and no shrinking, at 25 examples a
property (a mutant needs one failing example; the profile `mutation` in `tests/conftest.py`),
so a verdict is the same on every run.

Why a runner of our own: mutmut 3 names each mutant after its file's path with only a
`src/` prefix stripped, and it refuses a `pythonpath` setting, while this repository's
Lambda code is imported from `functions/` (`memory_core.window`, not
`functions.memory_core.window`); cosmic-ray runs one whole test command per mutant, and
our unit suite takes minutes. The runner here imports nothing it mutates, serves each
mutant to a forked pytest through an import hook, and runs only the tests that execute the
mutated line (found with coverage.py). A full run takes about an hour on two cores;
`make mutation MODULES="window.py trim.py"` runs some modules and keeps the others'
figures, and `python -m mutation --recount` applies an edited `equivalent.toml` to the
stored results without running anything.
"""


def _markdown(results: dict[str, ModuleResult], stamp: str) -> str:
    total_mutants = sum(r.mutants for r in results.values())
    total_killed = sum(r.killed for r in results.values())
    total_equivalent = sum(len(r.equivalent) for r in results.values())
    meaningful = total_mutants - total_equivalent
    lines = [
        _INTRO,
        f"## Results ({stamp})",
        "",
        f"Target: every module kills at least {TARGET_SCORE:.0%} of its non-equivalent mutants.",
        "",
        "| Module | Mutants | Killed | Equivalent | Survived | Score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for result in results.values():
        lines.append(
            f"| `{result.module}` | {result.mutants} | {result.killed} | "
            f"{len(result.equivalent)} | {len(result.survived)} | {result.score:.1%} |"
        )
    overall = total_killed / meaningful if meaningful else 1.0
    lines.append(
        f"| **all** | {total_mutants} | {total_killed} | {total_equivalent} | "
        f"{meaningful - total_killed} | {overall:.1%} |"
    )
    lines += ["", "## Equivalent mutants", ""]
    for result in results.values():
        for entry in result.equivalent:
            lines.append(
                f"- `{result.module}:{entry['line']}` {entry['change']}: {entry['reason']}"
            )
    survivors = [(r.module, entry) for r in results.values() for entry in r.survived]
    lines += ["", "## Surviving mutants", ""]
    if not survivors:
        lines.append("None: every mutant that can change behaviour is killed.")
    for module, entry in survivors:
        untested = "" if entry["tested"] else " (no unit test executes this line)"
        if entry.get("error"):
            untested = " (pytest could not run its tests)"
        lines.append(f"- `{module}:{entry['line']}` {entry['change']}{untested}")
    return "\n".join(lines) + "\n"
