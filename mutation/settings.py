"""Where the domain and its unit tests are, and how pytest runs them for mutation."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DOMAIN = REPO_ROOT / "functions" / "memory_core"
UNIT_TESTS = REPO_ROOT / "tests" / "unit"
CONFTEST = "tests.conftest"
RESULTS_PATH = REPO_ROOT / "mutation" / "results.json"
EQUIVALENTS_PATH = REPO_ROOT / "mutation" / "equivalent.toml"
REPORT_PATH = REPO_ROOT / "docs" / "mutation.md"
# Hypothesis draws the same examples on every run and keeps no database: a mutant's
# verdict does not depend on the runs before it.
HYPOTHESIS_PROFILE = "mutation"


def pytest_arguments() -> list[str]:
    return ["-q", "-p", "no:cacheprovider", "--rootdir", str(REPO_ROOT)]
