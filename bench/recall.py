"""Recall on a long conversation: the handler's time for one `POST .../recall` on moto.

A conversation of 5,000 turns (mixed sizes, a minute apart, all within the
history range) is written as the store writes turns (`seed_conversation`, as
the items-read figure does), its folded part indexed by the compactor's own
`index_fold`, a fold at a time of `TURNS_PER_FOLD` turns: about what the
compaction trigger folds at chat sizes (2,500 exchanges through the handler and
the compactor made 587 folds). So the index is the one those folds would have
written and merged, without the quarter of an hour the exchanges take on moto.
Then recalls through the handler, each a query of three words of one turn
drawn at random: the handler's time, end to end, from the proxy event to the
answer.

Beside it, what the index saves: the same query ranked over every turn read
from the table (`rank` over all of them), the work a recall without an index
would do.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_recall_index import BODY_ATTRIBUTE, RECALL_PREFIX
from bench.common import derived_rng, median, percentile
from bench.dynamodb_reads import (
    TENANT,
    UNFOLDED_TURNS,
    handler_under_moto,
    seed_conversation,
    seeded_turns,
)
from local.proxy_events import invoke, proxy_event
from memory_core.recall import rank

TURNS = 5000
TURNS_PER_FOLD = 9
RECALLS = 30
CONTACT = "recall-bench"


def seed(handler: ModuleType, dynamodb: Any, turns: int) -> int:
    """The conversation's turns and its fold, then the index its folds write; the folds."""
    now = datetime.now(UTC).replace(microsecond=0)
    written = seeded_turns(turns, now)
    key = ConversationKey(TENANT, CONTACT)
    seed_conversation(dynamodb, key, written)
    folded = written[:-UNFOLDED_TURNS]
    folds = 0
    for start in range(0, len(folded), TURNS_PER_FOLD):
        folds += 1
        handler.STORE.index_fold(key, folds, folded[start : start + TURNS_PER_FOLD], erased_at=None)
    return folds


def queries(handler: ModuleType, count: int) -> list[str]:
    """Three words of a turn drawn at random, for each query."""
    rng = derived_rng("recall-queries")
    turns = export(handler)
    drawn: list[str] = []
    while len(drawn) < count:
        words = " ".join(block.get("text", "") for block in rng.choice(turns)["content"]).split()
        if len(words) >= 3:
            drawn.append(" ".join(rng.sample(words, 3)))
    return drawn


def recall_once(handler: ModuleType, query: str) -> tuple[float, dict[str, Any]]:
    path = f"/v1/tenants/{TENANT}/contacts/{CONTACT}/recall"
    event = proxy_event("POST", path, json.dumps({"query": query, "limit": 5}))
    started = time.perf_counter()
    status, _, answer = invoke(handler.lambda_handler, event)
    elapsed = (time.perf_counter() - started) * 1000
    if status != 200:
        raise RuntimeError(f"recall answered {status}: {answer}")
    return elapsed, answer


def export(handler: ModuleType) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    cursor = ""
    while True:
        path = f"/v1/tenants/{TENANT}/contacts/{CONTACT}/turns?limit=500{cursor}"
        status, _, page = invoke(handler.lambda_handler, proxy_event("GET", path, None))
        if status != 200:
            raise RuntimeError(f"the export answered {status}: {page}")
        turns += page["turns"]
        if not page["nextCursor"]:
            return turns
        cursor = f"&cursor={page['nextCursor']}"


def scan_and_rank(handler: ModuleType, query: str) -> float:
    """Milliseconds to read every turn from the table and rank them: recall without an index."""
    store = handler.SERVICE._store
    started = time.perf_counter()
    key = ConversationKey(TENANT, CONTACT)
    page = store.turns_page(key, None, 500)
    turns = [entry.turn for entry in page.turns]
    while page.last is not None:
        page = store.turns_page(key, page.last, 500)
        turns += [entry.turn for entry in page.turns]
    rank(query, turns, 5)
    return (time.perf_counter() - started) * 1000


def run(turns: int = TURNS, recalls: int = RECALLS) -> dict[str, Any]:
    with handler_under_moto() as (handler, dynamodb, _):
        folds = seed(handler, dynamodb, turns)
        key = ConversationKey(TENANT, CONTACT)
        stored = handler.STORE._query(key, RECALL_PREFIX, RECALL_PREFIX + "~", with_bodies=True)
        read = [item for _, item in handler.STORE._query_levels(key, True)]
        asked = queries(handler, recalls)
        recall_once(handler, asked[0])  # the first call's imports and caches, not measured
        timings: list[float] = []
        found = 0
        for query in asked:
            elapsed, answer = recall_once(handler, query)
            timings.append(elapsed)
            found += bool(answer["passages"])
        scans = [scan_and_rank(handler, query) for query in asked[:3]]
    p50 = median(timings)
    return {
        "turns": turns,
        "folds": folds,
        "turns_per_fold": TURNS_PER_FOLD,
        "recalls": recalls,
        f"p50_ms_at_{turns}_turns": round(p50, 1),
        f"p95_ms_at_{turns}_turns": round(percentile(timings, 95), 1),
        "recalls_with_a_passage": found,
        "index_items_read_per_recall": len(read),
        "index_bytes_read_per_recall": sum(len(item[BODY_ATTRIBUTE]["B"]) for item in read),
        "index_items_stored": len(stored),
        "index_bytes_stored": sum(len(item[BODY_ATTRIBUTE]["B"]) for item in stored),
        "scan_and_rank_ms_without_index": round(median(scans), 1),
        "index_speedup": round(median(scans) / p50, 1),
    }
