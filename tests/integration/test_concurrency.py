"""Parallel writers on one conversation, against a moto server (real HTTP, real races)."""

from __future__ import annotations

import importlib
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import boto3
import pytest

from converse_history.access import Caller
from converse_history.service import Incoming
from local.aws_resources import create_queues, create_table
from local.emulator import Emulator
from tests.integration.conftest import QUEUE, TABLE, minutes_ago

PARALLEL = 40


@pytest.fixture
def served_handler(monkeypatch, rules_file):
    server = Emulator().start()
    server.reset()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        dynamodb = boto3.client("dynamodb")
        create_table(dynamodb, TABLE)
        queue_url, _ = create_queues(boto3.client("sqs"), QUEUE)
        monkeypatch.setenv("TABLE_NAME", TABLE)
        monkeypatch.setenv("COMPACTION_QUEUE_URL", queue_url)
        monkeypatch.setenv("RULES_FILE", str(rules_file))
        monkeypatch.setenv("CALLER_IDENTITY", "optional")
        for name in [m for m in sys.modules if m.startswith("converse_history")]:
            del sys.modules[name]
        yield importlib.import_module("converse_history.handler"), dynamodb
    finally:
        server.stop()


def test_parallel_messages_get_counts_exactly_1_to_n_and_are_each_stored_once(served_handler):
    handler, dynamodb = served_handler
    start = minutes_ago(60)
    caller = Caller(arn=None, identity_required=False)

    def send(n: int) -> int:
        message = Incoming(
            id=f"m-{n:02d}",
            role="user",
            content=[{"text": f"message {n}"}],
            sent_at=start + timedelta(seconds=n),
        )
        answer = handler.SERVICE.converse("roomy", "busy", message, caller)
        return int(answer["turnCount"])

    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        counts = list(pool.map(send, range(PARALLEL)))

    assert sorted(counts) == list(range(1, PARALLEL + 1))
    items = dynamodb.scan(TableName=TABLE)["Items"]
    turns = [i for i in items if "turnId" in i]
    assert sorted(i["turnId"]["S"] for i in turns) == [f"m-{n:02d}" for n in range(PARALLEL)]
    (state,) = [i for i in items if i["SK"]["S"] == "TURN#~STATE"]
    assert state["turnsRecorded"]["N"] == str(PARALLEL)
    assert state["streakCount"]["N"] == str(PARALLEL)


def test_parallel_retries_of_one_message_store_it_once(served_handler):
    handler, dynamodb = served_handler
    caller = Caller(arn=None, identity_required=False)
    message = Incoming(id="same", role="user", content=[{"text": "hi"}], sent_at=minutes_ago(1))

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda _: handler.SERVICE.converse("roomy", "dup", message, caller), range(8))
        )

    assert {a["turnCount"] for a in answers} == {1}
    items = dynamodb.scan(TableName=TABLE)["Items"]
    assert len([i for i in items if "turnId" in i]) == 1
