"""What the figures share: the seed, medians and percentiles, the machine, the environment."""

from __future__ import annotations

import contextlib
import math
import os
import platform
import random
import socket
import statistics
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_ROOT = REPO_ROOT / "functions"
EXAMPLE_RULES = REPO_ROOT / "rules.example.json"
SEED = 20_260_601
"""Every synthetic conversation is drawn from this seed (or one derived from it)."""

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}
POWERTOOLS = {
    # What the stack sets on the converse Lambda (infra/service_function.py).
    "POWERTOOLS_SERVICE_NAME": "converse-history",
    "POWERTOOLS_METRICS_NAMESPACE": "ConversationMemory",
    "POWERTOOLS_LOG_LEVEL": "INFO",
}


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("no samples")
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), nearest rank: a value that was actually observed."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def rounded(value: float, digits: int = 2) -> float:
    return round(value, digits)


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "seed": SEED,
        # Other work on the machine moves every timing; a load above the CPU count means noise.
        "load_average_1m": load_average(),
    }


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not available on this platform
        return None


def derived_rng(*parts: object) -> random.Random:
    """A generator seeded from SEED and a label, so each figure's data is fixed on its own."""
    return random.Random(f"{SEED}:" + ":".join(str(part) for part in parts))


@contextlib.contextmanager
def patched_environ(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, remove) variables for the block; the previous values come back."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        _apply(values)
        yield
    finally:
        _apply(saved)


def _apply(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_child_environment() -> dict[str, str]:
    """The process environment without any AWS or Powertools setting a shell may carry."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "POWERTOOLS_")) and name != "PYTHONPATH"
    }
