"""The local event source mapping: batches, partial failures, retries and the DLQ."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

from local.compaction_poller import CompactionPoller
from tests.integration.conftest import minutes_ago


def poller(api, visibility_timeout=0):
    compactor = api.compactor()
    return CompactionPoller(
        api.sqs, api.queue_url, compactor.lambda_handler, threading.Lock(), visibility_timeout
    )


def test_requests_are_folded_and_deleted_and_a_poison_message_ends_in_the_dlq(api):
    start = minutes_ago(60)
    for n in range(13):
        api.converse(f"q{n}", tenant="roomy", sent_at=start + timedelta(minutes=n))
    api.sqs.send_message(QueueUrl=api.queue_url, MessageBody="not json")
    local = poller(api)
    assert local.poll_once()
    assert api.state("roomy")["foldVersion"]["N"] == "1"
    for _ in range(3):
        assert local.poll_once()  # the poison message comes back, and fails again
    assert not local.poll_once()
    dead = api.sqs.receive_message(QueueUrl=api.dlq_url).get("Messages", [])
    assert [m["Body"] for m in dead] == ["not json"]


def test_a_failed_message_waits_for_its_visibility_timeout(api):
    api.sqs.send_message(QueueUrl=api.queue_url, MessageBody=json.dumps({"tenantId": "a b"}))
    local = poller(api, visibility_timeout=60)
    assert local.poll_once()
    assert not local.poll_once()


def test_the_poller_runs_in_the_background_until_stopped(api):
    start = minutes_ago(60)
    for n in range(13):
        api.converse(f"q{n}", tenant="roomy", sent_at=start + timedelta(minutes=n))
    local = poller(api)
    local.start()
    try:
        for _ in range(100):
            state = api.state("roomy")
            if state and "foldVersion" in state:
                break
            threading.Event().wait(0.05)
    finally:
        local.stop()
    assert api.state("roomy")["foldVersion"]["N"] == "1"
    assert local.batches >= 1
