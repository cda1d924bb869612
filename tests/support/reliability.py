"""A ledger of what the reliability tests tried, for `docs/reliability.md`.

Tests call `tally(group, ...)` with real counts (inputs tried, faults injected,
parallel writers, turns lost); the session writes them to
`.reliability/counts.json`, and `python -m tests.support.reliability_report`
renders the table from the last run.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path

COUNTS_FILE = Path(__file__).resolve().parents[2] / ".reliability" / "counts.json"
FIELDS = ("inputs_tried", "faults_injected", "parallel_writers", "lost")

_lock = threading.Lock()
_counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(FIELDS, 0))


def tally(
    group: str,
    *,
    inputs_tried: int = 0,
    faults_injected: int = 0,
    parallel_writers: int = 0,
    lost: int = 0,
) -> None:
    with _lock:
        row = _counts[group]
        row["inputs_tried"] += inputs_tried
        row["faults_injected"] += faults_injected
        row["parallel_writers"] = max(row["parallel_writers"], parallel_writers)
        row["lost"] += lost


def write() -> None:
    if not _counts:
        return
    COUNTS_FILE.parent.mkdir(exist_ok=True)
    previous = json.loads(COUNTS_FILE.read_text()) if COUNTS_FILE.exists() else {}
    # A partial run (one file) updates its groups and keeps the others' last figures.
    previous.update(_counts)
    COUNTS_FILE.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")
