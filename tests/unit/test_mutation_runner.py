"""`make mutation`'s own parts: which mutants it makes, and how it counts them."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mutation.equivalents import Equivalent, equivalent_for, load_equivalents
from mutation.mutants import Mutant, mutants_of
from mutation.report import ModuleResult
from mutation.settings import DOMAIN
from mutation.workers import Outcome, Verdict

SAMPLE = '''
"""A module docstring is never mutated."""

from dataclasses import dataclass

LIMIT: int = 3


@dataclass(frozen=True)
class Box:
    """Nor a class docstring."""

    size: int = 2


def within(values: list[int], bound: int) -> list[int]:
    return [v for v in values if v < bound]


def verdict(a: int, b: int, strict: bool) -> str | None:
    if a >= b and not strict:
        return "over"
    total = a + b * 2
    total -= -1
    return None if total else "zero"
'''


@pytest.fixture
def sample(tmp_path: Path) -> list[Mutant]:
    path = tmp_path / "sample.py"
    path.write_text(textwrap.dedent(SAMPLE))
    return mutants_of(path, "sample.py")


def run(mutant: Mutant, function: str, *args: Any) -> Any:
    namespace: dict[str, Any] = {"__name__": "sample"}
    exec(mutant.code("sample.py"), namespace)
    return namespace[function](*args)


def changes(mutants: list[Mutant]) -> list[tuple[int, str]]:
    return [(m.line, m.change) for m in mutants]


def test_every_operator_makes_its_mutant_on_its_own_line(sample: list[Mutant]) -> None:
    assert changes(sample) == [
        (6, "`3` → `4`"),
        (6, "`3` → `2`"),
        (13, "`2` → `3`"),
        (13, "`2` → `1`"),
        (17, "`return [v for v in values if v < bound]` → `return None`"),
        (17, "`v < bound` → `not v < bound`"),
        (17, "`v < bound` → `v <= bound`"),
        (21, "`a >= b and (not strict)` → `not (a >= b and (not strict))`"),
        (21, "`a >= b and (not strict)` → `a >= b or not strict`"),
        (21, "`a >= b` → `a > b`"),
        (21, "`not strict` → `not not strict`"),
        (22, "`return 'over'` → `return None`"),
        (23, "`a + b * 2` → `a - b * 2`"),
        (23, "`b * 2` → `b // 2`"),
        (23, "`2` → `3`"),
        (23, "`2` → `1`"),
        (24, "`total -= -1` → `total += -1`"),
        (24, "`-1` → `+1`"),
        (24, "`1` → `2`"),
        (24, "`1` → `0`"),
        (25, "`return None if total else 'zero'` → `return None`"),
        (25, "`total` → `not total`"),
    ]


def test_docstrings_annotations_decorators_and_strings_are_left_alone(
    sample: list[Mutant],
) -> None:
    mutated_lines = {m.line for m in sample}
    # The docstrings, `frozen=True`, and the lines with nothing but annotations.
    assert mutated_lines.isdisjoint({2, 9, 10, 11, 16, 20})


def test_each_mutant_is_the_module_with_that_one_change(sample: list[Mutant]) -> None:
    by_change = {m.change: m for m in sample}
    boundary = by_change["`v < bound` → `v <= bound`"]
    assert run(boundary, "within", [1, 2, 3], 3) == [1, 2, 3]
    swapped = by_change["`a >= b and (not strict)` → `a >= b or not strict`"]
    assert run(swapped, "verdict", 1, 2, False) == "over"
    # Every other function of the same mutant is untouched.
    assert run(swapped, "within", [1, 2, 3], 3) == [1, 2]
    assert run(boundary, "verdict", 3, 2, False) == "over"


def test_a_mutant_keeps_the_module_line_numbers(sample: list[Mutant]) -> None:
    mutant = next(m for m in sample if m.line == 23)
    namespace: dict[str, Any] = {}
    exec(mutant.code("sample.py"), namespace)
    assert namespace["verdict"].__code__.co_firstlineno == 20
    assert mutant.line_text == "total = a + b * 2"


def write_equivalents(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "equivalent.toml"
    path.write_text(textwrap.dedent(body))
    return path


def test_an_equivalence_matches_by_module_line_text_and_change_not_line_number(
    sample: list[Mutant], tmp_path: Path
) -> None:
    path = write_equivalents(
        tmp_path,
        """
        [[equivalent]]
        module = "sample.py"
        line = "  total -= -1  "
        change = "`1` → `0`"
        reason = "adding 0 or 1 makes no difference here"
        """,
    )
    equivalents = load_equivalents(path)
    matched = [m for m in sample if equivalent_for(m, equivalents)]
    assert changes(matched) == [(24, "`1` → `0`")]
    # The same line and change in another module is another mutant.
    elsewhere = dataclasses.replace(matched[0], module="other.py")
    assert equivalent_for(elsewhere, equivalents) is None
    # Once the line is edited, the entry no longer matches (and the mutant is reported).
    edited = dataclasses.replace(matched[0], line_text="total -= -2")
    assert equivalent_for(edited, equivalents) is None


def test_an_equivalence_without_its_reason_is_refused(tmp_path: Path) -> None:
    path = write_equivalents(
        tmp_path,
        """
        [[equivalent]]
        module = "sample.py"
        line = "total -= -1"
        change = "`1` → `0`"
        """,
    )
    with pytest.raises(SystemExit, match="entry 1 lacks reason"):
        load_equivalents(path)


@pytest.fixture
def one_equivalence(tmp_path: Path) -> list[Equivalent]:
    """`total -= -1` with `1` → `0` declared equivalent."""
    return load_equivalents(
        write_equivalents(
            tmp_path,
            """
            [[equivalent]]
            module = "sample.py"
            line = "total -= -1"
            change = "`1` → `0`"
            reason = "r"
            """,
        )
    )


def test_the_score_counts_only_mutants_that_can_change_behaviour(
    sample: list[Mutant], one_equivalence: list[Equivalent]
) -> None:
    equivalents = one_equivalence
    verdicts: dict[int, Verdict] = {21: "survived", 20: "no_tests", 19: "survived", 18: "timeout"}
    outcomes = [Outcome(m, verdicts.get(m.index, "killed"), 0.1) for m in sample]
    result = ModuleResult.of("sample.py", outcomes, equivalents)
    # The timeout counts as killed; the equivalent survivor does not count at all.
    assert (result.mutants, result.killed, len(result.equivalent)) == (22, 19, 1)
    assert [(s["line"], s["tested"]) for s in result.survived] == [(25, False), (25, True)]
    assert result.score == 19 / 21
    assert ModuleResult.from_json("sample.py", result.to_json()) == result


def test_stored_results_follow_the_equivalences_as_they_are_now(
    sample: list[Mutant], one_equivalence: list[Equivalent]
) -> None:
    outcomes = [Outcome(m, "survived" if m.line == 24 else "killed", 0.1) for m in sample]
    stored = ModuleResult.from_json(
        "sample.py", ModuleResult.of("sample.py", outcomes, []).to_json()
    )
    assert [s["change"] for s in stored.survived] == [
        "`total -= -1` → `total += -1`",
        "`-1` → `+1`",
        "`1` → `2`",
        "`1` → `0`",
    ]
    recounted = stored.recounted(one_equivalence)
    assert [e["change"] for e in recounted.equivalent] == ["`1` → `0`"]
    assert len(recounted.survived) == 3
    assert recounted.score == 18 / 21
    # The entry removed, the mutant survives again.
    assert len(recounted.recounted([]).survived) == 4
    assert recounted.recounted([]).score == stored.score


def test_a_mutant_inside_a_table_of_constants_runs_the_tests_of_its_statement() -> None:
    # Coverage records only a folded constant's first line: a mutant of an entry further
    # down is looked up there, and a line of its own is its own.
    from mutation.__main__ import _statement_start  # noqa: PLC0415 (runs the CLI module)

    source = (DOMAIN / "tokens.py").read_text().splitlines()
    start = source.index("_BLOCK_STARTS = (") + 1
    entry = next(n for n, text in enumerate(source, 1) if text.startswith("    (0x31, "))
    assert start < entry
    assert _statement_start("tokens.py", entry) == start
    assert _statement_start("tokens.py", start) == start
    own = next(n for n, text in enumerate(source, 1) if text.startswith("UNITS_PER_TOKEN ="))
    assert _statement_start("tokens.py", own) == own
