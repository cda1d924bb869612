"""A long session on the emulation: moto as released beside `local/moto_dynamodb.py`'s fixes.

Each variant runs in a process of its own (moto's instance tracking cannot be
undone once on): exchanges (a converse call, then the agent's reply) go
through the real handler under in-process moto, twenty a contact, as a busy
`make run` sees them. Measured: the process's resident memory before and
after, and the milliseconds an exchange takes over the first and the last
hundred. Informational in absolute terms (a noisy machine); the ratios,
last hundred over first, are what the fixes are for.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import FUNCTIONS_ROOT, REPO_ROOT, median, rounded

EXCHANGES = 400
BLOCK = 100
PER_CONTACT = 20


def run(exchanges: int = EXCHANGES, block: int = BLOCK) -> dict[str, Any]:
    figures = {variant: _in_a_process(variant, exchanges, block) for variant in ("moto", "fixed")}
    return {
        **figures,
        "exchanges": exchanges,
        "memory_growth_ratio_moto_over_fixed": rounded(
            figures["moto"]["memory_growth_mb"] / max(figures["fixed"]["memory_growth_mb"], 1.0)
        ),
        "last_block_ms_ratio_moto_over_fixed": rounded(
            figures["moto"]["ms_last_block"] / figures["fixed"]["ms_last_block"]
        ),
    }


def _in_a_process(variant: str, exchanges: int, block: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.emulation", variant, str(exchanges), str(block)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(FUNCTIONS_ROOT), str(REPO_ROOT)])},
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _session(variant: str, exchanges: int, block: int) -> dict[str, Any]:
    from bench.dynamodb_reads import converse, handler_under_moto, reply  # noqa: PLC0415

    blocks: list[float] = []
    with handler_under_moto(fixed_emulation=variant == "fixed") as (handler, _dynamodb, _sqs):
        start = datetime.now(UTC) - timedelta(hours=6)
        rss_before = _rss_mb()
        for first in range(0, exchanges, block):
            timings: list[float] = []
            for index in range(first, first + block):
                contact = f"long-{index // PER_CONTACT}"
                sent = start + timedelta(seconds=2 * index)
                began = time.perf_counter()
                converse(handler, contact, f"question {index} " + "q" * 400, sent)
                reply(handler, contact, f"answer {index} " + "a" * 400, sent + timedelta(seconds=1))
                timings.append((time.perf_counter() - began) * 1000)
            # The median: a collection pause or a noisy neighbour moves the mean, not it.
            blocks.append(median(timings))
        rss_after = _rss_mb()
    return {
        "ms_first_block": rounded(blocks[0]),
        "ms_last_block": rounded(blocks[-1]),
        "ms_last_over_first": rounded(blocks[-1] / blocks[0]),
        "ms_by_block": [rounded(ms) for ms in blocks],
        "memory_growth_mb": rounded(rss_after - rss_before),
    }


def _rss_mb() -> float:
    """The resident set now (Linux), else the peak so far."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


if __name__ == "__main__":
    print(json.dumps(_session(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
