"""The mutants that cannot change behaviour, each with the reason, from mutation/equivalent.toml.

An entry names its module, the mutated line as written and the change, so it still matches
after lines above it move, and stops matching (and is reported) once that line changes.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from mutation.mutants import Mutant
from mutation.settings import EQUIVALENTS_PATH


@dataclass(frozen=True)
class Equivalent:
    module: str
    line_text: str
    change: str
    reason: str

    def matches(self, mutant: Mutant) -> bool:
        return self.matches_text(mutant.module, mutant.line_text, mutant.change)

    def matches_text(self, module: str, line_text: str, change: str) -> bool:
        return (self.module, self.line_text, self.change) == (module, line_text, change)


def load_equivalents(path: Path = EQUIVALENTS_PATH) -> list[Equivalent]:
    if not path.exists():
        return []
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    equivalents = []
    for number, entry in enumerate(entries, start=1):
        missing = {"module", "line", "change", "reason"} - set(entry)
        if missing:
            raise SystemExit(f"{path.name}: entry {number} lacks {', '.join(sorted(missing))}")
        equivalents.append(
            Equivalent(entry["module"], entry["line"].strip(), entry["change"], entry["reason"])
        )
    return equivalents


def equivalent_for(mutant: Mutant, equivalents: list[Equivalent]) -> Equivalent | None:
    return next((entry for entry in equivalents if entry.matches(mutant)), None)
