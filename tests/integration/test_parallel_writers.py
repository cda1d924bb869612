"""Parallel writers and compactors on one conversation, against the emulator over real HTTP.

The emulator (`local/emulator.py`) answers one request at a time, as DynamoDB
applies one write to an item at a time, while the threads here race each
other between their reads and their conditional writes. The service and the
compactor are called directly from the threads: Powertools' resolver keeps
the current event on the app and is not thread-safe, and a Lambda
environment serves one event at a time anyway, so parallel Lambdas are
parallel service calls on one table.
"""

from __future__ import annotations

import functools
import importlib
import random
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from adapters.conversation_store import ConversationKey
from converse_history.access import Caller
from converse_history.service import Incoming
from local.aws_resources import create_queues, create_table
from local.emulator import Emulator
from memory_core.tokens import estimate_turn_tokens
from memory_core.turns import Turn
from tests.integration.conftest import QUEUE, TABLE, minutes_ago, request_record
from tests.support.reliability import tally

WRITERS = 20
PAIRS = WRITERS // 2
"""Messages and replies interleaved: 20 writers, 10 of them taking the lock."""
TENANT = "roomy"  # a turn cap of 1000: no escalation gets in the way
CALLER = Caller(arn=None, identity_required=False)


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    server = Emulator().start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class World:
    handler: ModuleType
    compactor: ModuleType
    dynamodb: Any
    sqs: Any
    queue_url: str

    def items(self, contact: str) -> list[dict[str, Any]]:
        partition = f"TENANT#{TENANT}#CONTACT#{contact}"
        response = self.dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": partition}},
            ConsistentRead=True,
        )
        return list(response["Items"])

    def turns(self, contact: str) -> list[dict[str, Any]]:
        return [i for i in self.items(contact) if "turnId" in i]

    def state(self, contact: str) -> dict[str, Any]:
        (state,) = [i for i in self.items(contact) if i["SK"]["S"] == "TURN#~STATE"]
        return state

    def memory(self, contact: str) -> dict[str, Any]:
        """The memory now served; empty before the first fold."""
        found = [i for i in self.items(contact) if i["SK"]["S"] == "TURN#~MEMORY"]
        return found[0] if found else {}

    def requests(self) -> list[dict[str, Any]]:
        return list(
            self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
            ).get("Messages", [])
        )


def _fresh(module: str) -> ModuleType:
    package = module.split(".", maxsplit=1)[0]
    for name in [m for m in sys.modules if m.startswith(package)]:
        del sys.modules[name]
    return importlib.import_module(module)


@pytest.fixture
def world(emulator: Emulator, monkeypatch: pytest.MonkeyPatch, rules_file: Any) -> World:
    emulator.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", emulator.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    dynamodb = boto3.client("dynamodb")
    sqs = boto3.client("sqs")
    create_table(dynamodb, TABLE)
    queue_url, _ = create_queues(sqs, QUEUE)
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("COMPACTION_QUEUE_URL", queue_url)
    monkeypatch.setenv("RULES_FILE", str(rules_file))
    monkeypatch.setenv("CALLER_IDENTITY", "optional")
    return World(
        _fresh("converse_history.handler"), _fresh("compactor.handler"), dynamodb, sqs, queue_url
    )


def _in_parallel(tasks: list[Callable[[], Any]], workers: int = WRITERS) -> list[Any]:
    """Run the tasks on `workers` threads, the first of them released at once; the results."""
    starters = min(workers, len(tasks))
    barrier = threading.Barrier(starters)

    def run(indexed: tuple[int, Callable[[], Any]]) -> Any:
        index, task = indexed
        if index < starters:  # the pool hands the first tasks to its threads in order
            barrier.wait(timeout=30)
        return task()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, enumerate(tasks)))


def _message(role: str, n: int, at: datetime, prefix: str) -> Incoming:
    return Incoming(
        id=f"{prefix}-{n:02d}",
        role=role,  # type: ignore[arg-type]
        content=[{"text": f"{'question' if role == 'user' else 'answer'} {prefix}-{n:02d}"}],
        sent_at=at,
    )


def _tokens(message: Incoming) -> int:
    assert message.sent_at is not None
    assert message.id is not None
    return estimate_turn_tokens(Turn(message.id, message.role, message.content, message.sent_at))


def assert_counters_exact(world: World, contact: str, expected_ids: set[str]) -> None:
    """Every id stored once, and the counters agree with the turns.

    The turns lost are counted into the ledger before they are asserted away, so a
    failing run reports them.
    """
    turns = world.turns(contact)
    ids = Counter(t["turnId"]["S"] for t in turns)
    assert all(count == 1 for count in ids.values()), ids
    lost = len(expected_ids - set(ids))
    tally("Parallel writers", lost=lost)
    assert lost == 0, sorted(expected_ids - set(ids))
    assert set(ids) == expected_ids
    markers = [i for i in world.items(contact) if i["SK"]["S"].startswith("MSGID#")]
    assert {m["turnSk"]["S"] for m in markers} == {t["SK"]["S"] for t in turns}
    state = world.state(contact)
    folded = int(world.memory(contact).get("turnsFolded", {}).get("N", "0"))
    assert int(state["turnsRecorded"]["N"]) == len(turns)
    assert int(state["unfoldedTurns"]["N"]) + folded == len(turns)


# --- writers ------------------------------------------------------------------------


def test_twenty_parallel_replies_are_each_stored_once_with_exact_counters(world):
    service = world.handler.SERVICE
    start = minutes_ago(60)
    replies = [_message("assistant", n, start + timedelta(seconds=n), "r") for n in range(WRITERS)]

    def reply_and_retry(message: Incoming) -> tuple[Any, Any]:
        first = service.record(TENANT, "replies", message, CALLER)
        again = service.record(TENANT, "replies", message, CALLER)  # a client's retry
        return first, again

    answers = _in_parallel([functools.partial(reply_and_retry, m) for m in replies])

    assert all(first == again for first, again in answers)
    assert_counters_exact(world, "replies", {m.id for m in replies if m.id})
    state = world.state("replies")
    assert state["turnsRecorded"]["N"] == str(WRITERS)
    assert state["unfoldedTurns"]["N"] == str(WRITERS)
    assert int(state["unfoldedTokens"]["N"]) == sum(_tokens(m) for m in replies)
    assert "version" not in state  # replies take no lock
    # The contact's first message after them starts the streak and takes the version.
    answer = service.converse(
        TENANT, "replies", _message("user", 0, start + timedelta(minutes=1), "q"), CALLER
    )
    assert answer["turnCount"] == 1
    assert world.state("replies")["turnsRecorded"]["N"] == str(WRITERS + 1)
    tally("Parallel writers", parallel_writers=WRITERS)


def test_parallel_messages_and_replies_interleaved_keep_every_count_exact(world):
    service = world.handler.SERVICE
    start = minutes_ago(60)
    questions = [_message("user", n, start + timedelta(seconds=2 * n), "q") for n in range(PAIRS)]
    replies = [
        _message("assistant", n, start + timedelta(seconds=2 * n + 1), "a") for n in range(PAIRS)
    ]
    tasks: list[Callable[[], Any]] = [
        functools.partial(service.converse, TENANT, "mixed", m, CALLER) for m in questions
    ] + [functools.partial(service.record, TENANT, "mixed", m, CALLER) for m in replies]
    random.Random(7).shuffle(tasks)

    answers = _in_parallel(tasks)

    counts = sorted(a["turnCount"] for a in answers if "turnCount" in a)
    assert counts == list(range(1, PAIRS + 1))  # each message counted once, none twice
    expected = {m.id for m in questions + replies if m.id}
    assert_counters_exact(world, "mixed", expected)
    state = world.state("mixed")
    assert state["streakCount"]["N"] == str(PAIRS)
    assert state["version"]["N"] == str(PAIRS)
    assert state["turnsRecorded"]["N"] == str(2 * PAIRS)
    assert int(state["unfoldedTokens"]["N"]) == sum(_tokens(m) for m in questions + replies)
    # Enough was unfolded to ask for a compaction, and the lease let exactly one through.
    assert len(world.requests()) == 1
    tally("Parallel writers", parallel_writers=WRITERS)


# --- compactors ---------------------------------------------------------------------


def _record(world: World, contact: str, pairs: int, start: datetime, prefix: str) -> set[str]:
    """Questions and replies, one after the other; their ids."""
    service = world.handler.SERVICE
    ids = set()
    for n in range(pairs):
        question = _message("user", n, start + timedelta(seconds=2 * n), f"{prefix}q")
        reply = _message("assistant", n, start + timedelta(seconds=2 * n + 1), f"{prefix}a")
        service.converse(TENANT, contact, question, CALLER)
        service.record(TENANT, contact, reply, CALLER)
        ids |= {question.id or "", reply.id or ""}
    return ids


def _points(world: World, contact: str) -> list[str]:
    return str(world.memory(contact)["foldSummary"]["S"]).splitlines()


def assert_each_folded_once(world: World, contact: str, ids: set[str]) -> None:
    points = _points(world, contact)
    for turn_id in ids:
        assert sum(p.endswith(f" {turn_id}") for p in points) == 1, (turn_id, points)


def test_parallel_compactors_make_one_fold_per_version_and_fold_each_turn_once(world):
    compactor = world.compactor.COMPACTOR
    key = ConversationKey(TENANT, "folded")
    start = minutes_ago(120)
    ids: set[str] = set()
    outcomes: Counter[str] = Counter()
    for round_ in range(3):
        ids |= _record(world, "folded", 6, start + timedelta(minutes=10 * round_), f"{round_}")
        results = _in_parallel([lambda: compactor.compact(key)] * 6)
        # The compactor module is imported afresh per test: its outcomes compare by value.
        round_outcomes = Counter(r.outcome.value for r in results)
        assert round_outcomes["folded"] == 1, round_outcomes  # one fold per version
        outcomes += round_outcomes
        state = world.state("folded")
        assert state["foldVersion"]["N"] == str(round_ + 1)
        assert world.memory("folded")["turnsFolded"]["N"] == str(len(ids))
        assert state["unfoldedTurns"]["N"] == "0"
        assert state["unfoldedTokens"]["N"] == "0"
        assert "leaseUntil" not in state
    assert outcomes["lost_race"] + outcomes["nothing_to_fold"] == 15
    assert_each_folded_once(world, "folded", ids)
    assert_counters_exact(world, "folded", ids)
    tally("Parallel writers", parallel_writers=6)


def test_duplicate_deliveries_of_one_request_processed_in_parallel_fold_once(world):
    ids = _record(world, "dup", 8, minutes_ago(60), "")
    (message,) = world.requests()
    record = SQSRecord(
        {
            **request_record(TENANT, "dup"),
            "messageId": message["MessageId"],
            "body": message["Body"],
        }
    )
    fold_one = world.compactor.fold_one

    _in_parallel([lambda: fold_one(record)] * 8)

    state = world.state("dup")
    assert state["foldVersion"]["N"] == "1"
    assert world.memory("dup")["turnsFolded"]["N"] == str(len(ids))
    assert state["unfoldedTurns"]["N"] == "0"
    assert_each_folded_once(world, "dup", ids)
    assert_counters_exact(world, "dup", ids)
    tally("Parallel writers", parallel_writers=8)


def test_writers_and_compactors_at_once_lose_nothing_and_fold_nothing_twice(world):
    service = world.handler.SERVICE
    compactor = world.compactor.COMPACTOR
    key = ConversationKey(TENANT, "busy")
    start = minutes_ago(60)
    questions = [_message("user", n, start + timedelta(seconds=2 * n), "q") for n in range(PAIRS)]
    replies = [
        _message("assistant", n, start + timedelta(seconds=2 * n + 1), "a") for n in range(PAIRS)
    ]
    tasks: list[Callable[[], Any]] = [
        functools.partial(service.converse, TENANT, "busy", m, CALLER) for m in questions
    ] + [functools.partial(service.record, TENANT, "busy", m, CALLER) for m in replies]
    busy = sys.modules[type(compactor).__module__].ConversationBusy  # this test's import

    def compact_or_give_back() -> Any:
        # With turns arriving between its read and its claim, a compactor gives the record
        # back for a later delivery (the queue retries it); that is an outcome, not a failure.
        try:
            return compactor.compact(key)
        except busy:
            return "busy"

    tasks += [compact_or_give_back] * 6
    random.Random(11).shuffle(tasks)

    _in_parallel(tasks)
    compactor.compact(key)  # whatever is still unfolded, late turns included

    ids = {m.id or "" for m in questions + replies}
    assert_counters_exact(world, "busy", ids)
    # A turn that landed below a fold committed meanwhile (or below a claim) was late:
    # listed, and folded by a later compaction, so every turn is folded exactly once.
    assert_each_folded_once(world, "busy", ids)
    state = world.state("busy")
    assert int(world.memory("busy")["turnsFolded"]["N"]) == len(ids)
    assert "lateTurns" not in state or state["lateTurns"]["L"] == []
    tally("Parallel writers", parallel_writers=WRITERS)  # the pool's threads
