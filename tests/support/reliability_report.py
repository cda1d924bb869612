"""Render `docs/reliability.md` from the counts the last test run recorded.

make reliability-report     # runs the suite's reliability groups, then renders
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from tests.support.reliability import COUNTS_FILE

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"

# What each group tries and what it shows; the figures come from the run.
DESCRIPTIONS: dict[str, tuple[str, str]] = {}


def describe(group: str) -> tuple[str, str]:
    for prefix, description in DESCRIPTIONS.items():
        if group.startswith(prefix):
            return description
    return ("", "")


def render(counts: dict[str, dict[str, int]]) -> str:
    lines = [
        "# Reliability and security",
        "",
        "What the suite tries in order to break the memory, and what it shows. The",
        "figures are real counts from the last run of `make reliability-report`",
        f"({datetime.now(UTC):%Y-%m-%d}); `make test` runs the same groups, bounded, and",
        "`make test-fuzz` runs the API fuzzing and the stateful model deeper.",
        "",
        "| group | what it tries | what it shows | inputs tried | faults injected "
        "| parallel writers | lost |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for group in sorted(counts):
        row = counts[group]
        tries, shows = describe(group)
        lines.append(
            f"| {group} | {tries} | {shows} | {row['inputs_tried']} | {row['faults_injected']} "
            f"| {row['parallel_writers']} | {row['lost']} |"
        )
    lost = sum(row["lost"] for row in counts.values())
    lines += ["", f"Turns lost across every group: **{lost}**.", ""]
    return "\n".join(lines)


def main() -> int:
    if not COUNTS_FILE.exists():
        print(f"no counts yet: run the tests first ({COUNTS_FILE} is missing)", file=sys.stderr)
        return 1
    DOC.write_text(render(json.loads(COUNTS_FILE.read_text())), encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
