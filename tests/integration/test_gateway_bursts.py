"""The local gateway: a burst held and answered, one readable log line a request."""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from local.http_gateway import LISTEN_BACKLOG, LambdaGateway


def slow_lambda(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    time.sleep(0.002)  # a Lambda takes its time; the burst piles up meanwhile
    return {"statusCode": 200, "headers": {}, "body": json.dumps({"path": event["rawPath"]})}


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


def converse_answer(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    time.sleep(0.2)  # long enough for a client to give up first
    return {"statusCode": 200, "headers": {}, "body": json.dumps({"decision": "model"})}


@pytest.fixture
def serving() -> Iterator[LambdaGateway]:
    server = LambdaGateway(("127.0.0.1", 0), converse_answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_each_request_is_one_readable_line_with_its_status_time_and_decision(serving, capsys):
    host, port = serving.server_address[:2]
    request = urllib.request.Request(f"http://{host}:{port}/v1/x/converse", b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200
    serving.shutdown()  # waits for the line to be written
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r'127\.0\.0\.1 - "POST /v1/x/converse" 200 \d+ ms model', lines[0])


def test_a_client_that_leaves_before_the_answer_is_one_line_not_a_traceback(serving, capsys):
    client = socket.create_connection(serving.server_address[:2])
    client.sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    # Closed with a reset, as a client that gives up does: the answer has nowhere to go.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    time.sleep(0.5)
    serving.shutdown()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines() == ['127.0.0.1 - "GET /slow" client disconnected before the answer']


def test_what_a_client_sends_reaches_the_terminal_escaped(serving, capsys):
    client = socket.create_connection(serving.server_address[:2])
    client.sendall(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 GET / HTTP/1.1\r\n\r\n")
    client.recv(4096)
    client.close()
    serving.shutdown()
    err = capsys.readouterr().err
    assert err.strip()
    assert all(character.isprintable() for character in err.replace("\n", ""))
    assert "\\x16\\x03\\x01\\x00" in err
