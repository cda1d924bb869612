"""A long session through one local runner, over HTTP: its memory, its latency, a burst.

One `python -m local` (what `make run` starts once installed) serves the
whole figure, over its embedded moto, the compactor polling its queue.
Exchanges (a converse call, then the agent's reply through `POST /turns`) go
to the example rules' `demo` tenant, twenty a contact: under the default turn
cap of 25, so every converse call is answered with a window (decision
`model`), never escalated. Every message carries a `sentAt` a few seconds
after the previous one, the session starting hours in the past, since the cap
counts by `sentAt`.

Measured: the runner's resident memory (VmRSS) right after exchange 100 and
right after the last, and the converse calls' latency, timed by the client
from opening the connection to the last byte, over the hundred exchanges up
to each. The first measurement is at exchange 100, not at start, so that
one-time warm-up (imports, caches, the first allocations) is not counted as
growth. Then a burst: 64 converse calls released together, each from a
contact of its own, and how many were answered 200. moto is no DynamoDB and
the runner serves one invocation at a time: these figures describe the local
runner, not AWS.
"""

from __future__ import annotations

import http.client
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.conversation_store import format_instant
from bench.common import derived_rng, percentile, rounded
from bench.conversations import corpus
from bench.local_e2e import request_json, started_runner

TENANT = "demo"
EXCHANGES = 2_000
EARLY_EXCHANGE = 100
WINDOW = 100
"""Exchanges whose converse calls make one latency sample: those up to each measurement."""
PARALLEL_CALLS = 64
EXCHANGES_PER_CONTACT = 20
"""Under the tenant's turn cap of 25 contact messages, so no call is escalated."""
SECONDS_BETWEEN_MESSAGES = 3
MESSAGE_CHARS = 400
LAST_MESSAGE_HOURS_AGO = 1
"""The session ends this long before it starts: every `sentAt` is in the past."""


def run(
    exchanges: int = EXCHANGES,
    early: int = EARLY_EXCHANGE,
    window: int = WINDOW,
    parallel_calls: int = PARALLEL_CALLS,
) -> dict[str, Any]:
    if not 0 < window <= early <= exchanges - window:
        raise ValueError("the two latency windows must fit, apart, in the session")
    messages = 2 * exchanges + parallel_calls
    first_sent = datetime.now(UTC) - timedelta(
        hours=LAST_MESSAGE_HOURS_AGO, seconds=messages * SECONDS_BETWEEN_MESSAGES
    )
    source = corpus(derived_rng("local_runner"))
    latencies_ms: list[float] = []
    rss_mb: dict[int, float] = {}
    with started_runner() as runner:
        pid = runner.process.pid
        rss_at_ready = _rss_mb(pid)
        for index in range(exchanges):
            latencies_ms.append(_exchange(runner.base_url, index, first_sent, source))
            if index + 1 in (early, exchanges):
                rss_mb[index + 1] = _rss_mb(pid)
        burst_sent = first_sent + timedelta(seconds=2 * exchanges * SECONDS_BETWEEN_MESSAGES)
        outcomes, burst_seconds = _burst(runner.base_url, parallel_calls, burst_sent, source)
    early_ms = latencies_ms[early - window : early]
    late_ms = latencies_ms[exchanges - window : exchanges]
    p50_early, p50_late = percentile(early_ms, 50), percentile(late_ms, 50)
    return {
        "exchanges": exchanges,
        "exchanges_per_contact": EXCHANGES_PER_CONTACT,
        "message_chars": MESSAGE_CHARS,
        "window_exchanges": window,
        "rss_mb_at_ready": rounded(rss_at_ready, 1),
        f"rss_mb_at_{early}": rounded(rss_mb[early], 1),
        f"rss_mb_at_{exchanges}": rounded(rss_mb[exchanges], 1),
        "rss_growth": rounded(rss_mb[exchanges] / rss_mb[early]),
        f"p50_ms_at_{early}": rounded(p50_early, 1),
        f"p99_ms_at_{early}": rounded(percentile(early_ms, 99), 1),
        f"p50_ms_at_{exchanges}": rounded(p50_late, 1),
        f"p99_ms_at_{exchanges}": rounded(percentile(late_ms, 99), 1),
        "p50_growth": rounded(p50_late / p50_early),
        "parallel_calls": parallel_calls,
        "parallel_answered": outcomes.get("200", 0),
        "parallel_outcomes": outcomes,
        "parallel_seconds": rounded(burst_seconds, 2),
        "runner_ready_seconds": rounded(runner.ready_seconds, 2),
        "exit_code": runner.process.returncode,
    }


def _exchange(base_url: str, index: int, first_sent: datetime, source: str) -> float:
    """One exchange of the session; the milliseconds its converse call took."""
    path = f"{base_url}/v1/tenants/{TENANT}/contacts/long-{index // EXCHANGES_PER_CONTACT}"
    asked = first_sent + timedelta(seconds=2 * index * SECONDS_BETWEEN_MESSAGES)
    answered = asked + timedelta(seconds=SECONDS_BETWEEN_MESSAGES)
    question = {"text": _text(source, 2 * index), "sentAt": format_instant(asked)}
    before = time.perf_counter()
    status, answer = request_json(f"{path}/converse", {"message": question})
    elapsed_ms = (time.perf_counter() - before) * 1000
    if status != 200 or answer.get("decision") != "model":
        raise RuntimeError(f"converse call {index + 1} answered {status}: {answer}")
    reply = {"role": "assistant", "text": _text(source, 2 * index + 1)}
    status, answer = request_json(f"{path}/turns", {**reply, "sentAt": format_instant(answered)})
    if status != 201:
        raise RuntimeError(f"reply {index + 1} answered {status}: {answer}")
    return elapsed_ms


def _burst(
    base_url: str, calls: int, sent_at: datetime, source: str
) -> tuple[dict[str, int], float]:
    """`calls` converse calls released at once, each from its own contact.

    The outcomes by status, or by the error that stood for one (a reset
    connection, a timeout), and the seconds until the last was answered.
    """
    release = threading.Barrier(calls + 1)
    outcomes: list[str] = [""] * calls

    def call(n: int) -> None:
        url = f"{base_url}/v1/tenants/{TENANT}/contacts/burst-{n}/converse"
        message = {"text": _text(source, n), "sentAt": format_instant(sent_at)}
        release.wait()
        try:
            status, _ = request_json(url, {"message": message})
            outcomes[n] = str(status)
        except (OSError, http.client.HTTPException, ValueError) as error:
            outcomes[n] = type(error).__name__

    threads = [threading.Thread(target=call, args=(n,)) for n in range(calls)]
    for thread in threads:
        thread.start()
    release.wait()  # every thread is at the barrier: all are let go together
    released = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - released
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts, seconds


def _text(source: str, n: int) -> str:
    """A seeded message of MESSAGE_CHARS characters, different for each n."""
    start = (n * 7_919) % (len(source) - MESSAGE_CHARS)
    return source[start : start + MESSAGE_CHARS]


def _rss_mb(pid: int) -> float:
    """The process's resident set now, from /proc (Linux)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024
