"""The local gateway under a burst: every parallel connection is held, then answered."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from local.http_gateway import LISTEN_BACKLOG, LambdaGateway


def slow_lambda(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    time.sleep(0.002)  # a Lambda takes its time; the burst piles up meanwhile
    return {"statusCode": 200, "headers": {}, "body": json.dumps({"path": event["path"]})}


@pytest.fixture
def gateway() -> Iterator[LambdaGateway]:
    server = LambdaGateway(("127.0.0.1", 0), slow_lambda)
    try:
        yield server
    finally:
        server.server_close()


def test_the_kernel_holds_a_backlog_of_connections_while_the_gateway_is_busy(gateway):
    # Nothing accepts yet: only the listen backlog holds the connections that complete.
    held: list[socket.socket] = []
    try:
        for _ in range(LISTEN_BACKLOG):
            client = socket.create_connection(gateway.server_address[:2], timeout=2)
            held.append(client)
    finally:
        for client in held:
            client.close()
    assert len(held) == LISTEN_BACKLOG >= 128


def test_a_burst_of_parallel_calls_is_answered_without_a_reset(gateway):
    serving = threading.Thread(target=gateway.serve_forever, daemon=True)
    serving.start()
    host, port = gateway.server_address[:2]
    start = threading.Barrier(150)
    answers: list[Any] = [None] * 150

    def call(index: int) -> None:
        start.wait()
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/call/{index}", timeout=60) as reply:
                answers[index] = json.loads(reply.read())["path"]
        except OSError as error:
            answers[index] = error

    callers = [threading.Thread(target=call, args=(i,)) for i in range(150)]
    try:
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(timeout=120)
    finally:
        gateway.shutdown()
    assert answers == [f"/call/{index}" for index in range(150)]
