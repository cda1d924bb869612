"""The client over Lambda: `MemoryClient.over_lambda` against the real handler, in-process.

`FakeLambda` (tests/support/lambda_stand_in.py) stands in for botocore's
Lambda client over the handler under moto. It can fail an invocation before
the handler runs (Lambda's throttling, a 5xx) or after it (the answer lost on
the way back), so the retries and their idempotence are checked against the
real service. Without a region or credentials, botocore's own Lambda client
is made and refused before anything is sent, as the client's `NotConfigured`.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import (
    ClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.validate import validate_parameters

from conversation_memory_client import (
    Conflict,
    ConverseResult,
    InvalidRequest,
    MemoryClient,
    MemoryView,
    NotConfigured,
    NotFound,
    RateLimited,
    RecordedTurn,
    SentInFuture,
    ServiceUnavailable,
    UnknownTenant,
)
from conversation_memory_client.transports import LambdaTransport, region_of_function
from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import Api
from tests.support.lambda_stand_in import FUNCTION, UNHANDLED, FakeLambda
from tests.support.no_aws_configuration import clear_aws_configuration


def lambda_error(code: str, status: int) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": f"{code} (injected)"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "Invoke",
    )


THROTTLED = lambda_error("TooManyRequestsException", 429)
SERVICE_FAILED = lambda_error("ServiceException", 500)
ANSWER_LOST = ReadTimeoutError(endpoint_url="https://lambda.us-east-1.amazonaws.com")


@dataclass
class Harness:
    client: MemoryClient
    fake: FakeLambda
    sleeps: list[float]
    api: Api


@pytest.fixture
def harness(api: Api) -> Harness:
    fake = FakeLambda(api.handler)
    sleeps: list[float] = []
    client = MemoryClient.over_lambda(FUNCTION, lambda_client=fake, sleep=sleeps.append)
    return Harness(client, fake, sleeps, api)


def _contact() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def assert_valid_for_bedrock(result: ConverseResult) -> None:
    """The fragment as Bedrock's own request model takes it, `modelId` beside it."""
    assert result.converse is not None
    session = botocore.session.get_session()
    shape = (
        session.create_client("bedrock-runtime", region_name="us-east-1")
        .meta.service_model.operation_model("Converse")
        .input_shape
    )
    validate_parameters({"modelId": "m", **result.converse}, shape)


# -- the three calls -----------------------------------------------------------------


def test_converse_answers_a_result_whose_fragment_bedrock_takes(harness: Harness):
    contact = _contact()

    result = harness.client.converse("acme", contact, "What are your opening hours?")

    assert isinstance(result, ConverseResult)
    assert (result.decision, result.escalated, result.reason) == ("model", False, None)
    assert result.turn_count == 1
    assert result.window is not None
    assert result.window.kept == 0
    assert result.memory is None
    # The client drew the id once and sent it: the service recorded the message under it.
    assert harness.fake.events[0]["message"]["id"] == result.message_id
    assert result.converse is not None
    assert result.converse == result.raw["converse"]
    assert result.converse["messages"][-1]["content"] == [{"text": "What are your opening hours?"}]
    assert_valid_for_bedrock(result)


def test_a_reply_and_a_tool_round_are_recorded_and_shown_to_the_model(harness: Harness):
    client, contact = harness.client, _contact()
    client.converse("acme", contact, "What is the weather in Paris?")
    call = {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}

    asked = client.record(
        "acme",
        contact,
        role="assistant",
        content=[{"text": "Let me look."}, {"toolUse": call}],
        usage={"inputTokens": 12, "outputTokens": 7},
    )
    result = {"toolUseId": "tooluse_1", "content": [{"json": {"sky": "clear"}}]}
    returned = client.record("acme", contact, role="user", content=[{"toolResult": result}])
    replied = client.record("acme", contact, role="assistant", text="Clear skies in Paris.")
    following = client.converse("acme", contact, "And tomorrow?")

    assert isinstance(asked, RecordedTurn)
    assert (asked.role, returned.role, replied.role) == ("assistant", "user", "assistant")
    assert asked.content == [{"text": "Let me look."}, {"toolUse": call}]
    assert asked.raw["turn"]["id"] == asked.id
    assert replied.sent_at.endswith("Z")
    history = following.raw["history"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"][1] == {"toolUse": call}
    assert "toolResult" in history[2]["content"][0]
    assert following.turn_count == 2
    assert_valid_for_bedrock(following)


def test_memory_gives_the_counters_and_not_found_before_anything_was_recorded(harness: Harness):
    client, contact = harness.client, _contact()
    client.converse("acme", contact, "Hello")
    client.record("acme", contact, role="assistant", text="Hi, how can I help?")

    view = client.memory("acme", contact)
    with pytest.raises(NotFound) as nothing:
        client.memory("acme", _contact())

    assert isinstance(view, MemoryView)
    assert view.memory is None
    assert view.counters["turnsRecorded"] == 2
    assert view.counters["turnCount"] == 1
    assert (nothing.value.status, nothing.value.code) == (404, "not_found")
    assert harness.sleeps == []


def test_the_memory_action_answers_as_the_http_route(api: Api):
    contact = _contact()
    api.converse("Hello", contact=contact)
    event = {"action": "memory", "tenantId": "acme", "contactId": contact}

    direct = api.handler.lambda_handler(event, LambdaContextStandIn())
    status, over_http = api.request("GET", f"/v1/tenants/acme/contacts/{contact}/memory")
    none = api.handler.lambda_handler({**event, "contactId": _contact()}, LambdaContextStandIn())
    unknown = api.handler.lambda_handler({**event, "tenantId": "nobody"}, LambdaContextStandIn())

    assert status == 200
    assert direct == over_http
    assert (none["statusCode"], none["error"]["code"]) == (404, "not_found")
    assert (unknown["statusCode"], unknown["error"]["code"]) == (404, "unknown_tenant")


def test_preview_gives_the_next_window_and_each_turns_standing(harness: Harness):
    client = harness.client
    contact = _contact()
    with pytest.raises(NotFound):
        client.preview("acme", contact)
    client.converse("acme", contact, "Is clause 7 still in force?", message_id="q1")
    client.record("acme", contact, role="assistant", text="It is.", message_id="a1")
    items = len(harness.api.items())

    preview = client.preview("acme", contact)

    assert preview.standings == {"q1": "window", "a1": "window"}
    assert preview.counts["window"] == 2
    assert (preview.memory, preview.memory_version, preview.omitted_tokens) == (None, None, {})
    assert preview.window.kept == 2
    assert preview.history[-1] == {"role": "assistant", "content": [{"text": "It is."}]}
    assert len(harness.api.items()) == items  # nothing recorded
    assert client.converse("acme", contact, "Thanks").raw["history"] == preview.history


def test_a_timezone_less_sent_at_is_refused_before_anything_is_sent(harness: Harness):
    with pytest.raises(ValueError, match="timezone"):
        harness.client.converse("acme", _contact(), "Hi", sent_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="exactly one"):
        harness.client.record("acme", _contact(), role="assistant")

    assert harness.fake.events == []


def test_sent_at_is_sent_in_utc_and_kept(harness: Harness):
    contact = _contact()
    sent = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)

    harness.client.converse("acme", contact, "Hi", sent_at=sent.astimezone())
    turn = harness.client.record("acme", contact, role="assistant", text="Hello", sent_at=sent)

    assert harness.fake.events[0]["message"]["sentAt"] == sent.isoformat().replace("+00:00", "Z")
    assert datetime.fromisoformat(turn.sent_at) == sent


# -- idempotent retries ----------------------------------------------------------------


def test_an_answer_lost_after_the_commit_is_retried_with_the_same_id_and_recorded_once(
    harness: Harness,
):
    contact = _contact()
    harness.fake.after.append(ANSWER_LOST)

    result = harness.client.converse("acme", contact, "Is clause 7 still in force?")

    first, retry = harness.fake.events
    assert first == retry, "the retry sends the same message, its id included"
    assert first["message"]["id"] == result.message_id
    assert result.turn_count == 1
    assert harness.client.memory("acme", contact).counters["turnsRecorded"] == 1
    assert len(harness.sleeps) == 1


def test_a_lost_reply_answer_is_retried_and_the_reply_recorded_once(harness: Harness):
    contact = _contact()
    harness.client.converse("acme", contact, "Hello")
    harness.fake.after.append(ANSWER_LOST)

    turn = harness.client.record("acme", contact, role="assistant", text="Hi!")

    assert harness.fake.events[1]["id"] == harness.fake.events[2]["id"] == turn.id
    assert harness.client.memory("acme", contact).counters["turnsRecorded"] == 2


def test_a_message_id_given_by_the_caller_is_the_one_recorded(harness: Harness):
    contact = _contact()

    first = harness.client.converse("acme", contact, "Hello", message_id="wa-0001")
    again = harness.client.converse("acme", contact, "Hello", message_id="wa-0001")

    assert first.message_id == again.message_id == "wa-0001"
    assert again.raw == first.raw, "a replay answers what the first call did"
    assert harness.client.memory("acme", contact).counters["turnsRecorded"] == 1


# -- refusals, each its exception --------------------------------------------------------


def test_an_unknown_tenant_raises_unknown_tenant(harness: Harness):
    with pytest.raises(UnknownTenant) as refused:
        harness.client.converse("nobody", _contact(), "Hello")

    assert (refused.value.status, refused.value.code) == (404, "unknown_tenant")
    assert "nobody" in refused.value.message


def test_an_invalid_request_raises_invalid_request_naming_the_field(harness: Harness):
    with pytest.raises(InvalidRequest) as refused:
        harness.client.converse("acme", _contact(), "Hello", message_id="not an id!")

    assert (refused.value.status, refused.value.code) == (400, "invalid_request")
    assert refused.value.message.startswith("message.id")
    assert len(harness.fake.events) == 1, "a refusal is not retried"
    assert harness.sleeps == []


def test_an_id_reused_for_other_content_raises_conflict(harness: Harness):
    contact = _contact()
    harness.client.converse("acme", contact, "Hello", message_id="m-1")

    with pytest.raises(Conflict) as refused:
        harness.client.converse("acme", contact, "Something else", message_id="m-1")

    assert (refused.value.status, refused.value.code) == (409, "id_reused")
    assert len(harness.fake.events) == 2


def test_a_message_from_the_future_raises_sent_in_future(harness: Harness):
    with pytest.raises(SentInFuture) as refused:
        harness.client.converse(
            "acme", _contact(), "Hello", sent_at=datetime.now(UTC) + timedelta(hours=1)
        )

    assert refused.value.status == 422


def test_the_rate_limit_raises_rate_limited_at_once_with_its_wait(harness: Harness):
    contact = _contact()
    for n in range(3):
        harness.client.converse("limited", contact, f"message {n}")

    with pytest.raises(RateLimited) as refused:
        harness.client.converse("limited", contact, "one too many")

    assert (refused.value.status, refused.value.code) == (429, "rate_limited")
    assert 0 < refused.value.retry_after_seconds <= 60
    assert len(harness.fake.events) == 4, "the service's own 429 is never retried"
    assert harness.sleeps == []
    assert harness.client.memory("limited", contact).counters["turnsRecorded"] == 3


# -- retries on throttling and failures --------------------------------------------------


def test_lambda_throttling_and_failures_are_retried_until_an_answer(harness: Harness):
    contact = _contact()
    harness.fake.before.extend([THROTTLED, SERVICE_FAILED, UNHANDLED])

    result = harness.client.converse("acme", contact, "Hello")

    assert result.turn_count == 1
    assert len(harness.fake.events) == 4
    assert len({event["message"]["id"] for event in harness.fake.events}) == 1
    assert len(harness.sleeps) == 3
    assert harness.client.memory("acme", contact).counters["turnsRecorded"] == 1


def test_throttling_on_every_attempt_raises_service_unavailable(harness: Harness):
    contact = _contact()
    harness.fake.before.extend([THROTTLED] * 4)

    with pytest.raises(ServiceUnavailable) as gave_up:
        harness.client.converse("acme", contact, "Hello")

    assert (gave_up.value.status, gave_up.value.code) == (429, "TooManyRequestsException")
    assert isinstance(gave_up.value.__cause__, Exception)
    assert len(harness.fake.events) == 4
    assert len(harness.sleeps) == 3
    assert harness.api.turn_items() == []


def test_a_function_failing_on_every_attempt_raises_service_unavailable(harness: Harness):
    harness.fake.before.extend([UNHANDLED] * 4)

    with pytest.raises(ServiceUnavailable) as gave_up:
        harness.client.memory("acme", _contact())

    assert (gave_up.value.status, gave_up.value.code) == (500, "function_error")
    assert gave_up.value.message == "boom"


def test_a_lambda_refusal_that_is_not_throttling_is_raised_as_it_came(harness: Harness):
    harness.fake.before.append(lambda_error("ResourceNotFoundException", 404))

    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        harness.client.converse("acme", _contact(), "Hello")

    assert len(harness.fake.events) == 1
    assert harness.sleeps == []


def test_the_backoff_doubles_its_ceiling_with_full_jitter(api: Api):
    fake = FakeLambda(api.handler, before=[THROTTLED] * 5)
    sleeps: list[float] = []
    jitters = iter([1.0, 1.0, 0.5, 0.0, 1.0])
    client = MemoryClient(
        LambdaTransport(FUNCTION, fake),
        max_attempts=6,
        sleep=sleeps.append,
        jitter=jitters.__next__,
    )

    client.converse("acme", _contact(), "Hello")

    assert sleeps == [0.25, 0.5, 0.5, 0.0, 4.0]


def test_max_attempts_of_one_never_retries(api: Api):
    fake = FakeLambda(api.handler, before=[SERVICE_FAILED])
    sleeps: list[float] = []
    client = MemoryClient.over_lambda(
        FUNCTION, lambda_client=fake, max_attempts=1, sleep=sleeps.append
    )

    with pytest.raises(ServiceUnavailable):
        client.converse("acme", _contact(), "Hello")

    assert (len(fake.events), sleeps) == (1, [])
    with pytest.raises(ValueError, match="max_attempts"):
        MemoryClient.over_lambda(FUNCTION, lambda_client=fake, max_attempts=0)


def test_each_call_draws_its_own_id(api: Api):
    fake = FakeLambda(api.handler)
    drawn = iter(["id-1", "id-2"])
    draw: Callable[[], str] = drawn.__next__
    client = MemoryClient(LambdaTransport(FUNCTION, fake), draw_message_id=draw)
    contact = _contact()

    first = client.converse("acme", contact, "Hello")
    reply = client.record("acme", contact, role="assistant", text="Hi")

    assert (first.message_id, reply.id) == ("id-1", "id-2")


# -- with no AWS configuration ---------------------------------------------------------


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS_* variable, no ~/.aws files, no instance role; and no connection made."""
    clear_aws_configuration(monkeypatch, tmp_path)

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)


ALIAS_ARN = "arn:aws:lambda:eu-west-1:123456789012:function:converse-history:live"


@pytest.mark.usefixtures("no_aws")
def test_no_region_raises_not_configured_naming_aws_default_region(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # read by other SDKs, not by botocore

    with pytest.raises(NotConfigured) as raised:
        MemoryClient.over_lambda(FUNCTION)

    assert raised.value.code == "no_region"
    assert isinstance(raised.value.__cause__, NoRegionError)
    assert "AWS_DEFAULT_REGION" in raised.value.message
    assert "not AWS_REGION" in raised.value.message
    assert f"invoking {FUNCTION}" in raised.value.message


@pytest.mark.usefixtures("no_aws")
def test_a_function_arn_names_the_region_to_invoke_in():
    assert region_of_function(ALIAS_ARN) == "eu-west-1"
    assert region_of_function("arn:aws-cn:lambda:cn-north-1:1:function:f") == "cn-north-1"
    assert region_of_function(FUNCTION) is None
    assert region_of_function("123456789012:function:converse-history") is None

    MemoryClient.over_lambda(ALIAS_ARN)  # no region given, none configured: the ARN's


@pytest.mark.usefixtures("no_aws")
def test_no_credentials_raise_not_configured_before_anything_is_sent():
    sleeps: list[float] = []
    client = MemoryClient.over_lambda(ALIAS_ARN, sleep=sleeps.append)

    with pytest.raises(NotConfigured) as raised:
        client.converse("acme", _contact(), "Hello")

    assert (raised.value.status, raised.value.code) == (0, "no_credentials")
    assert isinstance(raised.value.__cause__, NoCredentialsError)
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        assert variable in raised.value.message
    assert f"invoking {ALIAS_ARN}" in raised.value.message
    assert sleeps == [], "not retried: the next attempt would fail alike"


@pytest.mark.usefixtures("no_aws")
def test_partial_credentials_raise_not_configured_when_the_client_is_made(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")

    with pytest.raises(NotConfigured) as raised:
        MemoryClient.over_lambda(ALIAS_ARN)

    assert raised.value.code == "partial_credentials"
    assert isinstance(raised.value.__cause__, PartialCredentialsError)
    assert "AWS_SECRET_ACCESS_KEY" in raised.value.message


def test_credential_errors_of_a_given_lambda_client_raise_not_configured(api: Api):
    partial = PartialCredentialsError(provider="env", cred_var="AWS_SECRET_ACCESS_KEY")
    fake = FakeLambda(api.handler, before=[NoCredentialsError(), partial])
    sleeps: list[float] = []
    client = MemoryClient.over_lambda(FUNCTION, lambda_client=fake, sleep=sleeps.append)

    with pytest.raises(NotConfigured) as none:
        client.converse("acme", _contact(), "Hello")
    with pytest.raises(NotConfigured) as incomplete:
        client.memory("acme", _contact())

    assert (none.value.code, incomplete.value.code) == ("no_credentials", "partial_credentials")
    assert (len(fake.events), sleeps) == (2, [])
