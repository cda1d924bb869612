"""Faults injected where the network would put them, under moto: nothing lost, nothing half-written.

Each fault is an HTTP answer (or a socket error) handed to botocore in place of
moto's, from the client's own `before-send` event, so botocore's retry logic
runs exactly as against AWS; then the service's own retries, the compactor's
partial batch failure and the rules' last-good fallback take over. botocore's
backoff sleeps are recorded instead of slept, so the file stays fast.

After every scenario the table is checked: turn items, message-id markers and
the state's counters agree, so a turn is never stored without its state update.
"""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.endpoint
import pytest
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from moto.core.models import botocore_stubber as moto_stubber

from adapters.rules_source import AppConfigRulesSource
from local.http_gateway import LambdaGateway
from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import Api, minutes_ago, request_record
from tests.support.reliability import tally

DYNAMODB_ERRORS = "com.amazonaws.dynamodb.v20120810"
COMPACTOR_CONTEXT = LambdaContextStandIn(function_name="compactor-local")
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"

Fault = Callable[[AWSPreparedRequest], AWSResponse]


# --- the fault injector -------------------------------------------------------------


class _Body(io.BytesIO):
    """A raw HTTP body as botocore reads it (`stream()` for errors, `read()` for blobs)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def http_answer(
    request: AWSPreparedRequest,
    status: int,
    body: bytes,
    content_type: str = "application/x-amz-json-1.0",
    headers: dict[str, str] | None = None,
) -> AWSResponse:
    all_headers = {
        "Content-Type": content_type,
        "Content-Length": str(len(body)),
        **(headers or {}),
    }
    return AWSResponse(request.url, status, all_headers, _Body(body))


def aws_error(status: int, code: str, namespace: str = DYNAMODB_ERRORS, **extra: Any) -> Fault:
    """An AWS JSON-protocol error answer, as DynamoDB (or AppConfig, Bedrock) sends it."""

    def answer(request: AWSPreparedRequest) -> AWSResponse:
        body = {"__type": f"{namespace}#{code}", "message": f"injected {code}", **extra}
        return http_answer(
            request,
            status,
            json.dumps(body).encode(),
            headers={
                "x-amzn-ErrorType": code,
            },
        )

    return answer


def cancelled(*codes: str) -> Fault:
    """A TransactionCanceledException with one reason per action, as DynamoDB lists them."""
    reasons = [{"Code": code} for code in codes]
    message = (
        "Transaction cancelled, please refer cancellation reasons for specific reasons "
        f"[{', '.join(codes)}]"
    )
    return aws_error(
        400, "TransactionCanceledException", CancellationReasons=reasons, message=message
    )


def connection_lost(request: AWSPreparedRequest) -> AWSResponse:
    raise EndpointConnectionError(endpoint_url=request.url)


def read_timeout(request: AWSPreparedRequest) -> AWSResponse:
    raise ReadTimeoutError(endpoint_url=request.url)


THROTTLED = aws_error(400, "ThrottlingException")
OVER_CAPACITY = aws_error(400, "ProvisionedThroughputExceededException")
SERVER_ERROR = aws_error(500, "InternalServerError")
CONVERSE_CONFLICT = cancelled("None", "None", "TransactionConflict")


def always(_: int) -> bool:
    return True


@dataclass
class _Rule:
    operation: str
    fault: Fault
    when: Callable[[int], bool]
    apply_first: bool
    is_fault: bool
    attempts: int = 0


class Faults:
    """Takes moto's place on one client: each attempt is faulted by a rule or passed to moto.

    botocore calls every `before-send` handler and keeps the first answer, so a
    fault added beside moto would still let moto apply the request. Here moto's
    handler is replaced on this client by one that asks the rules first.
    """

    def __init__(self, client: Any, slept: list[float] | None = None) -> None:
        self._client = client
        self._rules: list[_Rule] = []
        self.injected = 0
        self.slept = [] if slept is None else slept
        """botocore's retry delays (see the `botocore_sleeps` fixture)."""
        client.meta.events.unregister("before-send", moto_stubber)
        client.meta.events.register("before-send", self._send)

    def fail(
        self,
        operation: str,
        fault: Fault,
        when: Callable[[int], bool] = always,
        *,
        apply_first: bool = False,
    ) -> None:
        """Fault the operation's attempts (numbered from 1) for which `when` holds.

        With `apply_first`, moto applies the request and its answer is lost:
        the ambiguous failure, where the caller cannot know it succeeded.
        """
        self._rules.append(_Rule(operation, fault, when, apply_first, is_fault=True))

    def serve(self, operation: str, answer: Fault) -> None:
        """Answer the operation's attempts that no fault took (for services moto lacks)."""
        self._rules.append(_Rule(operation, answer, always, apply_first=False, is_fault=False))

    def clear(self) -> None:
        self._rules.clear()

    def restore(self) -> None:
        self._client.meta.events.unregister("before-send", self._send)
        self._client.meta.events.register("before-send", moto_stubber)

    def _send(self, request: AWSPreparedRequest, event_name: str, **kwargs: Any) -> Any:
        operation = event_name.rsplit(".", 1)[-1]
        for rule in self._rules:
            if rule.operation != operation:
                continue
            rule.attempts += 1
            if rule.when(rule.attempts):
                if rule.apply_first:
                    moto_stubber(event_name, request, **kwargs)
                self.injected += rule.is_fault
                return rule.fault(request)
        return moto_stubber(event_name, request, **kwargs)


@pytest.fixture
def botocore_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry delays, recorded instead of slept (its backoff reaches seconds)."""
    slept: list[float] = []

    class _Time:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        def sleep(self, seconds: float) -> None:
            slept.append(seconds)

    monkeypatch.setattr(botocore.endpoint, "time", _Time())
    return slept


@pytest.fixture
def backoffs(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The service's own jittered backoffs between commit attempts, recorded, not slept."""
    waited: list[float] = []
    monkeypatch.setattr(api.handler.SERVICE, "_sleep", waited.append)
    return waited


@pytest.fixture
def dynamodb_faults(api: Api, botocore_sleeps: list[float]) -> Iterator[Faults]:
    faults = Faults(api.handler.SERVICE._store._client, botocore_sleeps)
    yield faults
    faults.restore()


# --- what the table must say --------------------------------------------------------


def assert_consistent(api: Api, tenant: str = "acme", contact: str = "c1") -> int:
    """Turns, markers and counters agree; returns the number of turns stored."""
    partition = f"TENANT#{tenant}#CONTACT#{contact}"
    items = [i for i in api.items() if i["PK"]["S"] == partition]
    (state,) = [i for i in items if i["SK"]["S"] == "TURN#~STATE"]
    memory = next((i for i in items if i["SK"]["S"] == "TURN#~MEMORY"), {})
    turns = {i["SK"]["S"]: i for i in items if i["SK"]["S"].startswith("TURN#2") and "turnId" in i}
    markers = [i for i in items if i["SK"]["S"].startswith("MSGID#")]
    assert len(turns) == len(markers) == int(state["turnsRecorded"]["N"])
    assert {m["turnSk"]["S"] for m in markers} == set(turns)
    watermark = state.get("foldWatermark", {}).get("S", "")
    late = {entry["M"]["sk"]["S"] for entry in state.get("lateTurns", {}).get("L", [])}
    unfolded = [t for sk, t in turns.items() if sk > watermark or sk in late]
    assert int(memory.get("turnsFolded", {}).get("N", "0")) == len(turns) - len(unfolded)
    assert int(state["unfoldedTurns"]["N"]) == len(unfolded)
    assert int(state["unfoldedTokens"]["N"]) == sum(int(t["tokens"]["N"]) for t in unfolded)
    return len(turns)


def over_http(api: Api, method: str, path: str, body: Any) -> tuple[int, str]:
    """The answer through the local API Gateway stand-in, whatever the handler did."""
    gateway = LambdaGateway(("127.0.0.1", 0), api.handler.lambda_handler)
    thread = threading.Thread(target=gateway.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        request = urllib.request.Request(
            gateway.url + path,
            data=json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
    finally:
        gateway.shutdown()
        gateway.server_close()
        thread.join(timeout=10)


def assert_clean_server_error(status: int, text: str) -> None:
    assert 500 <= status < 600
    answer = json.loads(text)  # JSON, not a page or a traceback
    assert set(answer["error"]) >= {"code", "message"}
    assert "Traceback" not in text
    assert 'File "' not in text


# --- DynamoDB throttling ------------------------------------------------------------


def _talk(api: Api, pairs: int, tenant: str = "acme", contact: str = "c1") -> list[int]:
    """Questions and replies; the answers' statuses, all of which must be successes."""
    start = minutes_ago(2 * pairs + 5)
    statuses = []
    for n in range(pairs):
        at = start + timedelta(minutes=2 * n)
        status, _ = api.converse(
            f"question {n}", tenant=tenant, contact=contact, sent_at=at, message_id=f"q-{n}"
        )
        statuses.append(status)
        status, _ = api.reply(
            f"answer {n}",
            tenant=tenant,
            contact=contact,
            sent_at=at + timedelta(minutes=1),
            message_id=f"a-{n}",
        )
        statuses.append(status)
    return statuses


THROTTLES = [
    ("Query", THROTTLED),
    ("Query", OVER_CAPACITY),
    ("TransactWriteItems", THROTTLED),
    ("TransactWriteItems", OVER_CAPACITY),
]


def test_throttling_is_retried_by_botocore_and_nothing_is_half_written(
    api, dynamodb_faults, backoffs
):
    for index, (operation, fault) in enumerate(THROTTLES):
        contact = f"c{index}"
        dynamodb_faults.clear()
        injected, slept = dynamodb_faults.injected, len(dynamodb_faults.slept)
        # Each call's first two attempts are throttled; the third (of botocore's four) passes.
        dynamodb_faults.fail(operation, fault, when=lambda attempt: attempt % 3 != 0)
        statuses = _talk(api, 4, contact=contact)
        assert statuses == [200, 201] * 4, operation
        turns = assert_consistent(api, contact=contact)
        faults = dynamodb_faults.injected - injected
        tally("Faults: DynamoDB", faults_injected=faults, lost=8 - turns)  # before the asserts
        assert turns == 8
        assert faults >= 8  # every call that made the operation, twice
        assert len(dynamodb_faults.slept) - slept == faults  # botocore retried each one
        state = api.state(contact=contact)
        assert state is not None
        assert state["streakCount"]["N"] == "4"
    assert backoffs == []  # nothing reached the service as a conflict


@pytest.mark.parametrize("reason", ["ThrottlingError", "ProvisionedThroughputExceeded"])
def test_an_item_throttled_inside_a_transaction_is_retried_by_the_service(
    api, dynamodb_faults, backoffs, reason
):
    # DynamoDB cancels the whole transaction and botocore does not retry a
    # cancellation: the service reads again and commits again.
    dynamodb_faults.fail(
        "TransactWriteItems", cancelled("None", "None", reason), when=lambda a: a % 2 == 1
    )
    statuses = _talk(api, 3)
    assert statuses == [200, 201] * 3
    assert assert_consistent(api) == 6
    assert len(backoffs) == dynamodb_faults.injected == 6
    tally(
        "Faults: DynamoDB", faults_injected=dynamodb_faults.injected, lost=6 - len(api.turn_items())
    )


def test_transaction_conflicts_are_retried_with_jittered_backoff_and_the_count_is_exact(
    api, dynamodb_faults, backoffs
):
    # Every commit loses three races before it wins: the state item is busy.
    dynamodb_faults.fail("TransactWriteItems", CONVERSE_CONFLICT, when=lambda a: a % 4 != 0)
    start = minutes_ago(30)
    counts = []
    for n in range(5):
        status, answer = api.converse(f"m{n}", sent_at=start + timedelta(minutes=n))
        assert status == 200
        counts.append(answer["turnCount"])
    assert counts == [1, 2, 3, 4, 5]
    assert len(backoffs) == dynamodb_faults.injected == 15
    # Full jitter under a ceiling that doubles per attempt: 0.02, 0.04, 0.08 s.
    for attempt, waited in zip([1, 2, 3] * 5, backoffs, strict=True):
        assert 0 <= waited <= 0.01 * 2**attempt
    assert len(set(backoffs)) > 1
    assert assert_consistent(api) == 5
    state = api.state()
    assert state is not None
    assert state["streakCount"]["N"] == "5"
    assert state["version"]["N"] == "5"
    tally(
        "Faults: DynamoDB", faults_injected=dynamodb_faults.injected, lost=5 - len(api.turn_items())
    )


def test_a_reply_meeting_a_concurrent_transaction_is_retried_not_failed(
    api, dynamodb_faults, backoffs
):
    # A reply takes no lock, but DynamoDB cancels a transaction that meets
    # another one on the same state item; before the fix this was a 500.
    api.converse("a question", sent_at=minutes_ago(5))
    dynamodb_faults.fail(
        "TransactWriteItems",
        cancelled("None", "None", "TransactionConflict"),
        when=lambda a: a <= 3,
    )
    status, answer = api.reply("the answer", sent_at=minutes_ago(4), message_id="r-1")
    assert status == 201
    assert answer["turn"]["id"] == "r-1"
    assert len(backoffs) == 3
    assert assert_consistent(api) == 2
    tally("Faults: DynamoDB", faults_injected=dynamodb_faults.injected)


@pytest.mark.parametrize("route", ["converse", "reply"])
def test_a_commit_whose_answer_is_lost_is_stored_once_and_answered_as_the_first(
    api, dynamodb_faults, route
):
    # The transaction is applied, then its answer is lost (a 500): botocore
    # sends it again, the message-id marker refuses it, and the first
    # recording's answer is given back.
    api.converse("first", sent_at=minutes_ago(10), message_id="q-0")
    dynamodb_faults.fail(
        "TransactWriteItems", SERVER_ERROR, when=lambda a: a == 1, apply_first=True
    )
    if route == "converse":
        status, answer = api.converse("second", sent_at=minutes_ago(9), message_id="q-1")
        assert status == 200
        assert answer["turnCount"] == 2
        assert [m["content"][0]["text"] for m in answer["history"]] == ["first"]
    else:
        status, answer = api.reply("reply", sent_at=minutes_ago(9), message_id="r-1")
        assert status == 201
        assert answer["turn"]["id"] == "r-1"
    assert dynamodb_faults.injected == 1
    assert assert_consistent(api) == 2
    # A caller's own retry of the same message is answered the same, still stored once.
    dynamodb_faults.clear()
    if route == "converse":
        _, again = api.converse("second", sent_at=minutes_ago(9), message_id="q-1")
        assert again == answer
    assert assert_consistent(api) == 2
    tally("Faults: DynamoDB", faults_injected=1, lost=2 - len(api.turn_items()))


# --- a failure that never clears ----------------------------------------------------


NEVER_CLEARS = [
    ("TransactWriteItems", SERVER_ERROR, "converse"),
    ("TransactWriteItems", SERVER_ERROR, "turns"),
    ("TransactWriteItems", THROTTLED, "converse"),
    ("TransactWriteItems", OVER_CAPACITY, "turns"),
    ("Query", SERVER_ERROR, "converse"),
]


def test_a_failure_that_never_clears_fails_the_call_cleanly_and_writes_nothing(
    api, dynamodb_faults
):
    for operation, fault, route in NEVER_CLEARS:
        dynamodb_faults.clear()
        injected, slept = dynamodb_faults.injected, len(dynamodb_faults.slept)
        dynamodb_faults.fail(operation, fault)
        path = f"/v1/tenants/acme/contacts/c1/{route}"
        body: dict[str, Any] = (
            {"message": {"text": "hello", "id": "m-1"}}
            if route == "converse"
            else {"role": "assistant", "text": "hello", "id": "m-1"}
        )
        status, text = over_http(api, "POST", path, body)
        assert_clean_server_error(status, text)
        assert dynamodb_faults.injected - injected == 4  # botocore's four attempts
        assert len(dynamodb_faults.slept) - slept == 3
        assert api.items() == []
        tally("Faults: DynamoDB", faults_injected=4)


def test_a_failure_that_never_clears_fails_a_direct_invocation_and_writes_nothing(
    api, dynamodb_faults
):
    dynamodb_faults.fail("TransactWriteItems", SERVER_ERROR)
    event = {"action": "converse", "tenantId": "acme", "contactId": "c1", "message": {"text": "hi"}}
    outcome: Any
    try:
        outcome = api.handler.lambda_handler(event, LambdaContextStandIn())
    except ClientError as error:  # a Lambda error: the workflow's Retry takes over
        outcome = error
    if isinstance(outcome, ClientError):
        assert outcome.response["Error"]["Code"] == "InternalServerError"
    else:
        assert outcome["statusCode"] >= 500
        assert "error" in outcome
    assert api.items() == []
    tally("Faults: DynamoDB", faults_injected=dynamodb_faults.injected)


def test_after_the_failure_clears_the_same_message_is_recorded_once(api, dynamodb_faults):
    dynamodb_faults.fail("TransactWriteItems", SERVER_ERROR)
    status, _ = over_http(
        api,
        "POST",
        "/v1/tenants/acme/contacts/c1/converse",
        {"message": {"text": "hi", "id": "m-1"}},
    )
    assert status >= 500
    dynamodb_faults.clear()
    status, answer = api.converse("hi", message_id="m-1")
    assert status == 200
    assert answer["turnCount"] == 1
    assert assert_consistent(api) == 1
    tally(
        "Faults: DynamoDB", faults_injected=dynamodb_faults.injected, lost=1 - len(api.turn_items())
    )


# --- SQS ----------------------------------------------------------------------------


def _short_turns(api: Api, n: int, start: datetime, tenant: str = "roomy") -> None:
    for i in range(n):
        status, _ = api.converse(f"t{i}", tenant=tenant, sent_at=start + timedelta(seconds=i))
        assert status == 200


def test_a_failed_compaction_request_keeps_the_turn_and_a_later_turn_asks_again(
    api, botocore_sleeps
):
    start = minutes_ago(30)
    _short_turns(api, 11, start)  # the 12th reaches the count trigger (half of 25)
    sqs = Faults(api.handler.SERVICE._queue._sqs())
    try:
        sqs.fail("SendMessage", connection_lost)
        status, answer = api.converse(
            "the 12th", tenant="roomy", sent_at=start + timedelta(minutes=1)
        )
        assert status == 200
        assert answer["turnCount"] == 12
        assert sqs.injected == 3  # botocore's three attempts for SQS
        state = api.state("roomy")
        assert state is not None
        assert "leaseUntil" not in state  # given back
        assert api.queued() == []
        sqs.clear()
        status, _ = api.converse("the 13th", tenant="roomy", sent_at=start + timedelta(minutes=2))
        assert status == 200
        assert len(api.queued()) == 1
    finally:
        sqs.restore()
    assert assert_consistent(api, "roomy") == 13
    tally("Faults: SQS", faults_injected=sqs.injected, lost=13 - len(api.turn_items()))


def test_when_the_lease_cannot_be_given_back_either_the_call_still_succeeds(
    api, dynamodb_faults, botocore_sleeps, monkeypatch
):
    start = minutes_ago(30)
    _short_turns(api, 11, start)
    sqs = Faults(api.handler.SERVICE._queue._sqs())
    try:
        sqs.fail("SendMessage", connection_lost)
        dynamodb_faults.fail("UpdateItem", SERVER_ERROR)  # the lease's release
        status, _ = api.converse("the 12th", tenant="roomy", sent_at=start + timedelta(minutes=1))
        assert status == 200  # the turn is committed: a 500 would only make the caller retry
        sqs.clear()
        dynamodb_faults.clear()
        state = api.state("roomy")
        assert state is not None
        assert "leaseUntil" in state  # held until it expires...
        status, _ = api.converse("the 13th", tenant="roomy", sent_at=start + timedelta(minutes=2))
        assert status == 200
        assert api.queued() == []
        # ...and once it has, the next turn asks again: delayed, never lost.
        later = datetime.now(UTC) + timedelta(seconds=901)
        monkeypatch.setattr(api.handler.SERVICE, "_clock", later.timestamp)
        status, _ = api.converse("the 14th", tenant="roomy", sent_at=later)
        assert status == 200
        assert len(api.queued()) == 1
    finally:
        sqs.restore()
    assert assert_consistent(api, "roomy") == 14
    tally("Faults: SQS", faults_injected=sqs.injected + dynamodb_faults.injected)


# --- the compactor ------------------------------------------------------------------


def _conversation(api: Api, pairs: int = 8) -> int:
    """Questions and replies on roomy/c1 (enough to ask for a compaction); the turns."""
    statuses = _talk(api, pairs, tenant="roomy")
    assert set(statuses) == {200, 201}
    return 2 * pairs


def _fold(compactor: Any, *records: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = compactor.lambda_handler({"Records": list(records)}, COMPACTOR_CONTEXT)
    return answer


def assert_folded_once(api: Api, pairs: int) -> None:
    state = api.state("roomy")
    assert state is not None
    memory = api.memory_item("roomy")
    assert memory["turnsFolded"]["N"] == str(2 * pairs)
    assert state["unfoldedTurns"]["N"] == "0"
    points = memory["foldSummary"]["S"].splitlines()
    for n in range(pairs):
        assert sum(p.endswith(f" Contact: question {n}") for p in points) == 1, points
        assert sum(p.endswith(f" Agent: answer {n}") for p in points) == 1, points
    assert assert_consistent(api, "roomy") == 2 * pairs


def bedrock_answer(text: str) -> Fault:
    def answer(request: AWSPreparedRequest) -> AWSResponse:
        body = {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110},
            "metrics": {"latencyMs": 5},
        }
        return http_answer(request, 200, json.dumps(body).encode(), "application/json")

    return answer


@pytest.mark.parametrize(
    "fault",
    [
        aws_error(429, "ThrottlingException", "com.amazonaws.bedrock"),
        aws_error(408, "ModelTimeoutException", "com.amazonaws.bedrock"),
        read_timeout,
    ],
    ids=["throttled", "model-timeout", "read-timeout"],
)
def test_a_summariser_throttle_or_timeout_fails_the_record_and_the_next_delivery_folds(
    api, botocore_sleeps, fault
):
    turns = _conversation(api)
    compactor = api.compactor(SUMMARISER="bedrock", BEDROCK_MODEL_ID=MODEL)
    bedrock = Faults(compactor.COMPACTOR._summariser._client)
    bedrock.fail("Converse", fault)
    (request,) = api.received()
    assert _fold(compactor, request) == {
        "batchItemFailures": [{"itemIdentifier": request["messageId"]}]
    }
    assert bedrock.injected >= 1  # botocore retries the throttles and timeouts first
    bedrock.clear()
    bedrock.serve("Converse", bedrock_answer("They covered eight questions."))
    state = api.state("roomy")
    assert state is not None
    assert api.memory_item("roomy") == {}  # an error never becomes a summary
    assert state["unfoldedTurns"]["N"] == str(turns)
    # The message comes back (it was not deleted): the next delivery folds.
    (again,) = api.received()
    assert again["body"] == request["body"]
    assert _fold(compactor, again) == {"batchItemFailures": []}
    state = api.state("roomy")
    assert state is not None
    memory = api.memory_item("roomy")
    assert memory["foldSummary"]["S"] == "They covered eight questions."
    assert memory["turnsFolded"]["N"] == str(turns)
    assert assert_consistent(api, "roomy") == turns
    tally(
        "Faults: summariser", faults_injected=bedrock.injected, lost=turns - len(api.turn_items())
    )


def test_a_compactor_killed_while_summarising_leaves_the_fold_to_the_next_run(api, monkeypatch):
    pairs = 8
    _conversation(api, pairs)
    compactor = api.compactor()
    (request,) = api.received()

    def killed(*_: Any) -> Any:
        raise SystemExit("the execution environment was shut down")

    monkeypatch.setattr(compactor.COMPACTOR._summariser, "summarise", killed)
    with pytest.raises(SystemExit):
        _fold(compactor, request)  # not an Exception: the whole invocation dies
    state = api.state("roomy")
    assert state is not None
    assert "foldSummary" not in state
    # A new execution environment gets the message again and folds it, once.
    fresh = api.compactor()
    (again,) = api.received()
    assert _fold(fresh, again) == {"batchItemFailures": []}
    tally("Faults: compactor", faults_injected=1, lost=2 * pairs - len(api.turn_items()))
    assert_folded_once(api, pairs)


def test_a_commit_that_fails_every_attempt_is_retried_by_the_next_delivery(api, botocore_sleeps):
    pairs = 8
    _conversation(api, pairs)
    compactor = api.compactor()
    store = Faults(compactor.COMPACTOR._store._client)
    store.fail("UpdateItem", SERVER_ERROR, when=lambda attempt: attempt <= 4)
    (request,) = api.received()
    assert _fold(compactor, request)["batchItemFailures"] == [
        {"itemIdentifier": request["messageId"]}
    ]
    state = api.state("roomy")
    assert state is not None
    assert "foldSummary" not in state
    (again,) = api.received()
    assert _fold(compactor, again) == {"batchItemFailures": []}
    assert_folded_once(api, pairs)
    store.restore()
    tally("Faults: compactor", faults_injected=store.injected)


def test_a_fold_committed_whose_answer_was_lost_counts_each_turn_once(api, botocore_sleeps):
    pairs = 8
    _conversation(api, pairs)
    compactor = api.compactor()
    store = Faults(compactor.COMPACTOR._store._client)
    store.fail("UpdateItem", SERVER_ERROR, when=lambda attempt: attempt == 1, apply_first=True)
    (request,) = api.received()
    # botocore sends the commit again; its version condition now fails: no double count.
    assert _fold(compactor, request) == {"batchItemFailures": []}
    store.restore()
    assert_folded_once(api, pairs)
    state = api.state("roomy")
    assert state is not None
    assert state["foldVersion"]["N"] == "1"
    # A duplicate delivery of the request finds nothing to fold.
    assert _fold(compactor, request_record("roomy", "c1", "dup")) == {"batchItemFailures": []}
    assert_folded_once(api, pairs)
    tally("Faults: compactor", faults_injected=store.injected)


def test_a_throttled_read_of_the_unfolded_turns_is_retried_and_folds(api, botocore_sleeps):
    pairs = 8
    _conversation(api, pairs)
    compactor = api.compactor()
    store = Faults(compactor.COMPACTOR._store._client)
    # The state and its memory are one Query (attempts 1 to 3 here), the unfolded
    # turns the next (attempts 4 and 5).
    store.fail("Query", THROTTLED, when=lambda attempt: attempt in (1, 2, 4))
    assert _fold(compactor, *api.received()) == {"batchItemFailures": []}
    store.restore()
    assert store.injected == 3
    assert_folded_once(api, pairs)
    tally("Faults: compactor", faults_injected=store.injected)


# --- AppConfig ----------------------------------------------------------------------

APP, ENV, PROFILE = "memory", "prod", "tenant-rules"
APPCONFIG = "com.amazonaws.appconfigdata"
CAPPED_AT_TWO = {"tenants": {"acme": {"maxTurnsPerConversation": 2}}}


class _Fetch:
    def __init__(self, document: Any) -> None:
        self.document = document
        self.error: Exception | None = None
        self.failures = 0

    def __call__(self) -> bytes:
        if self.error is not None:
            self.failures += 1
            raise self.error
        return json.dumps(self.document).encode()  # the configuration's bytes, as Powertools'


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _decisions(api: Api, n: int, start: datetime) -> list[tuple[int, str | None]]:
    answers = []
    for i in range(n):
        status, answer = api.converse(f"m{i}", sent_at=start + timedelta(minutes=i))
        answers.append((status, answer.get("decision") if status == 200 else None))
    return answers


def test_an_appconfig_outage_after_a_good_fetch_keeps_the_last_good_rules_serving(api, monkeypatch):
    fetch = _Fetch(CAPPED_AT_TWO)
    clock = _Clock()
    rejected: list[str] = []
    source = AppConfigRulesSource(
        APP, ENV, PROFILE, 30, rejected.append, max_age_seconds=45, fetch=fetch, clock=clock
    )
    source.current()  # the cold start's fetch
    monkeypatch.setattr(api.handler.SERVICE, "_rules", source)
    fetch.error = parameters.GetParameterError("Could not connect to the endpoint URL")
    start = minutes_ago(30)
    # The deployed cap (2, not the default 25) still applies during the outage.
    assert _decisions(api, 3, start) == [(200, "model"), (200, "model"), (200, "escalate")]
    status, answer = api.converse("hello", tenant="roomy")  # in the file, not in AppConfig
    assert (status, answer["error"]["code"]) == (404, "unknown_tenant")
    assert len(rejected) == 1
    assert fetch.failures == 1  # not one failing fetch per request: retried after the age
    clock.now += 45
    assert api.converse("m3", sent_at=start + timedelta(minutes=3))[0] == 200
    assert fetch.failures == 2
    tally("Faults: AppConfig", faults_injected=fetch.failures)


def _appconfig_data(document: Any, token: str) -> Fault:
    def answer(request: AWSPreparedRequest) -> AWSResponse:
        body = json.dumps(document).encode()
        headers = {
            "Next-Poll-Configuration-Token": token,
            "Next-Poll-Interval-In-Seconds": "60",
        }
        return http_answer(request, 200, body, "application/json", headers)

    return answer


def _session(request: AWSPreparedRequest) -> AWSResponse:
    body = json.dumps({"InitialConfigurationToken": "token-1"}).encode()
    return http_answer(request, 201, body, "application/json")


@pytest.fixture
def powertools_appconfig(api: Api, monkeypatch: pytest.MonkeyPatch) -> Iterator[Faults]:
    parameters.clear_caches()  # type: ignore[no-untyped-call, unused-ignore]
    client = boto3.client("appconfigdata")
    faults = Faults(client)
    monkeypatch.setitem(
        DEFAULT_PROVIDERS,
        "appconfig",
        parameters.AppConfigProvider(environment=ENV, application=APP, boto3_client=client),
    )
    yield faults
    faults.restore()
    parameters.clear_caches()  # type: ignore[no-untyped-call, unused-ignore]


def test_an_appconfig_outage_through_powertools_keeps_the_last_good_rules(
    api, monkeypatch, powertools_appconfig, botocore_sleeps
):
    # moto has no AppConfigData: its answers are given at the HTTP level, under
    # the real Powertools provider and botocore's retries.
    appconfig = powertools_appconfig
    appconfig.serve("StartConfigurationSession", _session)
    appconfig.serve("GetLatestConfiguration", _appconfig_data(CAPPED_AT_TWO, "token-2"))
    clock = _Clock()
    rejected: list[str] = []
    source = AppConfigRulesSource(APP, ENV, PROFILE, 30, rejected.append, clock=clock)
    source.current()
    monkeypatch.setattr(api.handler.SERVICE, "_rules", source)
    # Powertools' cache age runs out, and AppConfig is down.
    appconfig.clear()
    appconfig.fail("GetLatestConfiguration", aws_error(500, "InternalServerException", APPCONFIG))
    DEFAULT_PROVIDERS["appconfig"].clear_cache()
    start = minutes_ago(30)
    assert _decisions(api, 3, start) == [(200, "model"), (200, "model"), (200, "escalate")]
    assert len(rejected) == 1
    assert "InternalServerException" in rejected[0]
    assert appconfig.injected == 3  # botocore's attempts, once: not one fetch per request
    # AppConfig is back with a new deployment (the default cap of 25): it applies.
    appconfig.clear()
    appconfig.serve("GetLatestConfiguration", _appconfig_data({"tenants": {"acme": {}}}, "t-3"))
    clock.now += 45
    DEFAULT_PROVIDERS["appconfig"].clear_cache()
    assert _decisions(api, 1, start + timedelta(minutes=3)) == [(200, "model")]
    assert len(rejected) == 1
    tally("Faults: AppConfig", faults_injected=appconfig.injected)


def test_a_failure_that_never_clears_is_answered_in_the_apis_error_shape(api, dynamodb_faults):
    dynamodb_faults.fail("TransactWriteItems", SERVER_ERROR)
    status, answer = api.request(
        "POST", "/v1/tenants/acme/contacts/c1/converse", {"message": {"text": "hi", "id": "m-9"}}
    )
    assert status == 500
    assert answer["error"]["code"] == "internal_error"
    assert "Traceback" not in json.dumps(answer)
    assert api.items() == []
    tally("Faults: DynamoDB", faults_injected=4)
