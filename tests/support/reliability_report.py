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
DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "API fuzzing": (
        "schemathesis against the local runner's `/openapi.json`, every route",
        "no 5xx for any input, every answer matches its documented schema, invalid input refused",
    ),
    "Faults: DynamoDB": (
        "throttling on Query and TransactWriteItems, throttled items and conflicts inside "
        "transactions, failures that never clear, a commit whose answer was lost",
        "retried with backoff; a turn is never stored without its state update; counts exact",
    ),
    "Faults: SQS": (
        "the compaction request failing after the turn was committed",
        "the turn stays, the call answers 200, the lease is given back and a later turn asks again",
    ),
    "Faults: summariser": (
        "Bedrock throttles, timeouts, validation errors, empty or filtered answers",
        "the record fails and comes back; no summary is written from an error",
    ),
    "Faults: compactor": (
        "a compactor dying between reading and committing, a failing or lost commit",
        "the next run folds the same turns exactly once",
    ),
    "Faults: AppConfig": (
        "AppConfig unreachable, or a new document that does not validate",
        "the last good rules keep serving; the refusal names the field",
    ),
    "Input limits": (
        "ids, tenant and contact ids, text size in bytes, blocks, tool ids, sentAt formats",
        "each refused with a 4xx naming the field, nothing written",
    ),
    "Late turns and claims": (
        "turns recorded below the watermark, and turns landing inside a compaction's range "
        "while it summarises or between its read and its claim",
        "each is listed, counted and folded by the next compaction, exactly once",
    ),
    "Misconfiguration": (
        "every setting and rule with its bad values, at start and on reload",
        "the start fails (or the reload is refused) with the field named",
    ),
    "Parallel writers": (
        "parallel converse, replies, compactors and duplicate deliveries on one conversation",
        "exact turn counts, each turn stored once, one fold per version",
    ),
    "Tool conversations": (
        "random tool-heavy conversations recorded through the API: parallel calls, text "
        "before and after tool blocks, missing results, results for unknown ids, repeats, "
        "long loops, oversized inputs and results, turns outside the history range",
        "every converse answer is accepted by botocore's Converse model and Bedrock's "
        "conversation rules; the history is never empty and never over the cap",
    ),
    "Stateful model": (
        "random converse, reply, retry, compaction and clock-jump sequences, late and "
        "same-instant turns included, against a reference model of the spec",
        "counts, escalations, history range, window, fold and coverage invariants after "
        "every step, none narrowed",
    ),
}


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
        f"({datetime.now(UTC):%Y-%m-%d}); `make test` runs the same groups, bounded;",
        "`make test-fuzz` runs the API fuzzing deeper, and `HYPOTHESIS_PROFILE=deep` the",
        "stateful model and the other properties.",
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
