"""The client over HTTP: `MemoryClient.over_http` against the local runner, and its package.

The runner takes any caller (no IAM in front of it), so the signing is
checked on the requests themselves, observed on their way to the runner.
The throttling a gateway adds in front of the service (its own 429, a 502
page) is played by a scripted HTTP session. Without any AWS configuration,
a loopback URL is served unsigned and any other URL raises `NotConfigured`
saying what to set.
"""

from __future__ import annotations

import email.parser
import logging
import re
import shutil
import subprocess
import sys
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import BotoCoreError, NoCredentialsError, PartialCredentialsError
from botocore.httpsession import URLLib3Session

from conversation_memory_client import (
    Forbidden,
    InvalidRequest,
    MemoryClient,
    MemoryServiceError,
    NotConfigured,
    NotFound,
    RateLimited,
    ServiceUnavailable,
    UnknownTenant,
)
from conversation_memory_client.configuration import is_loopback
from conversation_memory_client.transports import region_of_api
from tests.e2e.runner_process import REPO_ROOT, Runner, free_port
from tests.support.no_aws_configuration import clear_aws_configuration

REGION = "us-east-1"


def _contact() -> str:
    return f"contact-{uuid.uuid4().hex[:12]}"


def _session(token: str | None = None) -> botocore.session.Session:
    session = botocore.session.Session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    return session


@dataclass
class Observed:
    """An HTTP session that sends through botocore's own and keeps every request sent."""

    inner: Any = field(default_factory=URLLib3Session)
    sent: list[Any] = field(default_factory=list)

    def send(self, request: Any) -> Any:
        self.sent.append(request)
        return self.inner.send(request)


@dataclass
class CannedResponse:
    status_code: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Scripted:
    """Answers the canned responses first, in order; then sends through to the runner."""

    canned: list[CannedResponse]
    inner: Observed = field(default_factory=Observed)

    def send(self, request: Any) -> Any:
        if self.canned:
            self.inner.sent.append(request)
            return self.canned.pop(0)
        return self.inner.send(request)


def _client(runner: Runner, http_session: Any, sleeps: list[float] | None = None) -> MemoryClient:
    return MemoryClient.over_http(
        runner.base_url,
        region=REGION,
        session=_session(),
        http_session=http_session,
        sleep=(sleeps if sleeps is not None else []).append,
    )


def test_converse_record_and_memory_over_http(shared_runner: Runner):
    client = MemoryClient.over_http(shared_runner.base_url + "/", region=REGION, session=_session())
    contact = _contact()

    first = client.converse("demo", contact, "What are your opening hours?")
    reply = client.record("demo", contact, role="assistant", text="We open at nine.")
    second = client.converse("demo", contact, "And on Saturdays?")
    view = client.memory("demo", contact)

    assert (first.decision, first.turn_count) == ("model", 1)
    assert (reply.role, reply.content) == ("assistant", [{"text": "We open at nine."}])
    assert second.turn_count == 2
    assert second.raw["history"] == [
        {"role": "user", "content": [{"text": "What are your opening hours?"}]},
        {"role": "assistant", "content": [{"text": "We open at nine."}]},
    ]
    assert second.converse is not None
    assert second.converse["messages"][-1] == second.raw["current"]
    assert view.counters["turnsRecorded"] == 3


def test_preview_over_http_records_nothing(shared_runner: Runner):
    client = MemoryClient.over_http(shared_runner.base_url + "/", region=REGION, session=_session())
    contact = _contact()
    client.converse("demo", contact, "What are your opening hours?", message_id="q1")

    first = client.preview("demo", contact)
    second = client.preview("demo", contact)

    assert first.standings == second.standings == {"q1": "window"}
    assert client.memory("demo", contact).counters["turnsRecorded"] == 1


def test_ids_are_sent_as_path_segments_percent_encoded(shared_runner: Runner):
    observed = Observed()
    client = _client(shared_runner, observed)
    contact = f"alice+{uuid.uuid4().hex[:6]}@example.com"

    client.converse("demo", contact, "Hello")
    view = client.memory("demo", contact)

    assert view.counters["turnsRecorded"] == 1
    assert "/contacts/alice%2B" in observed.sent[0].url
    assert "%40example.com/converse" in observed.sent[0].url


def test_refusals_raise_their_exceptions(shared_runner: Runner):
    client = _client(shared_runner, URLLib3Session())

    with pytest.raises(UnknownTenant) as unknown:
        client.converse("no-such-tenant", _contact(), "Hello")
    with pytest.raises(InvalidRequest) as invalid:
        client.record("demo", _contact(), role="user", text="a user turn here returns tool results")
    with pytest.raises(NotFound) as nothing:
        client.memory("demo", _contact())

    assert (unknown.value.status, unknown.value.code) == (404, "unknown_tenant")
    assert "no-such-tenant" in unknown.value.message
    assert (invalid.value.status, invalid.value.code) == (400, "invalid_request")
    assert (nothing.value.status, nothing.value.code) == (404, "not_found")


def test_every_request_is_signed_with_sigv4_for_execute_api(shared_runner: Runner):
    observed = Observed()
    client = MemoryClient.over_http(
        shared_runner.base_url,
        region="eu-west-1",
        session=_session(token="session-token-of-an-assumed-role"),
        http_session=observed,
    )
    contact = _contact()

    client.converse("demo", contact, "Hello")
    client.memory("demo", contact)

    for request in observed.sent:
        authorization = request.headers["Authorization"]
        assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-west-1/execute-api/aws4_request" in authorization
        signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {"host", "x-amz-date", "x-amz-security-token"} <= set(signed)
        assert request.headers["X-Amz-Security-Token"] == "session-token-of-an-assumed-role"
    post, get = observed.sent
    assert (post.method, get.method) == ("POST", "GET")
    assert post.headers["Content-Type"] == "application/json"
    assert "content-type" in post.headers["Authorization"]


def test_gateway_throttling_and_5xx_are_retried_with_the_same_message(shared_runner: Runner):
    scripted = Scripted(
        [
            CannedResponse(429, b'{"message": "Too Many Requests"}'),
            CannedResponse(502, b"<html>Bad Gateway</html>"),
            CannedResponse(503, b'{"message": "Service Unavailable"}', {"Retry-After": "2"}),
        ]
    )
    sleeps: list[float] = []
    client = _client(shared_runner, scripted, sleeps)
    contact = _contact()

    result = client.converse("demo", contact, "Hello")

    assert result.turn_count == 1
    bodies = {request.body for request in scripted.inner.sent}
    assert len(scripted.inner.sent) == 4
    assert len(bodies) == 1, "every attempt sends the same message, its id included"
    assert len(sleeps) == 3
    assert sleeps[2] == 2.0, "the gateway's Retry-After is waited for"
    assert client.memory("demo", contact).counters["turnsRecorded"] == 1


def test_the_services_own_429_and_other_4xx_are_never_retried(shared_runner: Runner):
    limited = (
        b'{"error": {"code": "rate_limited", "message": "too many messages from this contact; '
        b'not recorded; retry in 7 s", "retryAfterSeconds": 7}}'
    )
    scripted = Scripted(
        [
            CannedResponse(429, limited, {"Retry-After": "7"}),
            CannedResponse(403, b'{"message": "User is not authorized to perform this action"}'),
        ]
    )
    sleeps: list[float] = []
    client = _client(shared_runner, scripted, sleeps)

    with pytest.raises(RateLimited) as rate_limited:
        client.converse("demo", _contact(), "Hello")
    with pytest.raises(Forbidden) as forbidden:
        client.converse("demo", _contact(), "Hello")

    assert (rate_limited.value.code, rate_limited.value.retry_after_seconds) == ("rate_limited", 7)
    assert (forbidden.value.status, forbidden.value.code) == (403, "http_403")
    assert "not authorized" in forbidden.value.message
    assert (len(scripted.inner.sent), sleeps) == (2, [])


def test_a_service_that_never_answers_raises_service_unavailable_after_the_retries():
    sleeps: list[float] = []
    client = MemoryClient.over_http(
        f"http://127.0.0.1:{free_port()}",
        region=REGION,
        session=_session(),
        max_attempts=3,
        timeout_seconds=2.0,
        sleep=sleeps.append,
    )

    with pytest.raises(ServiceUnavailable) as gave_up:
        client.converse("demo", _contact(), "Hello")

    assert (gave_up.value.status, gave_up.value.code) == (503, "connection_failed")
    assert len(sleeps) == 2


def test_the_region_is_read_from_an_execute_api_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    clear_aws_configuration(monkeypatch, tmp_path)

    assert region_of_api("https://abc123.execute-api.eu-west-1.amazonaws.com/prod/") == "eu-west-1"
    assert region_of_api("http://127.0.0.1:8000") is None
    MemoryClient.over_http("https://abc123.execute-api.eu-west-1.amazonaws.com/prod/")
    with pytest.raises(NotConfigured, match="region"):
        MemoryClient.over_http("https://memory.example.com/prod/", session=_session())


def test_an_execute_api_url_signs_for_its_own_region_whatever_the_default(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    answer = CannedResponse(200, b'{"counters": {}}', {"Content-Type": "application/json"})
    scripted = Scripted([answer])
    client = MemoryClient.over_http(
        "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/",
        session=_session(),
        http_session=scripted,
    )
    client.memory("demo", "c-1")
    (request,) = scripted.inner.sent
    assert "/eu-west-1/execute-api/aws4_request" in request.headers["Authorization"]


# -- with no AWS configuration -------------------------------------------------------------


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A newcomer's shell: no AWS_* variable, no ~/.aws files, no instance role."""
    clear_aws_configuration(monkeypatch, tmp_path)


REMOTE_API = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/"


@pytest.mark.usefixtures("no_aws")
def test_make_runs_runner_is_served_unsigned_with_no_aws_configuration(shared_runner: Runner):
    observed = Observed()
    client = MemoryClient.over_http(shared_runner.base_url, http_session=observed)
    contact = _contact()

    first = client.converse("demo", contact, "What are your opening hours?")
    client.record("demo", contact, role="assistant", text="We open at nine.")
    view = client.memory("demo", contact)

    assert (first.decision, view.counters["turnsRecorded"]) == ("model", 2)
    assert len(observed.sent) == 3
    assert all("Authorization" not in request.headers for request in observed.sent)


@pytest.mark.usefixtures("no_aws")
def test_a_loopback_url_with_a_region_but_no_credentials_goes_unsigned_and_says_so(
    shared_runner: Runner, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    observed = Observed()
    client = MemoryClient.over_http(shared_runner.base_url, http_session=observed)
    contact = _contact()

    with caplog.at_level(logging.INFO, logger="conversation_memory_client"):
        client.converse("demo", contact, "Hello")
        client.memory("demo", contact)

    assert all("Authorization" not in request.headers for request in observed.sent)
    said = [r.getMessage() for r in caplog.records if "unsigned" in r.getMessage()]
    assert len(said) == 1, "said once, not at every request"
    assert shared_runner.base_url in said[0]
    assert "no AWS credentials" in said[0]


def test_loopback_urls_are_told_from_others():
    for url in (
        "http://127.0.0.1:8000",
        "http://127.8.9.10/",
        "http://localhost:8000/",
        "http://LOCALHOST",
        "http://[::1]:8000",
        "http://[::ffff:127.0.0.1]:8000",
    ):
        assert is_loopback(url), url
    for url in (
        REMOTE_API,
        "http://10.0.0.5:8000",
        "http://0.0.0.0:8000",
        "http://localhost.example.com",
        "http://127.0.0.1.nip.io",
        "not a url",
    ):
        assert not is_loopback(url), url


@pytest.mark.usefixtures("no_aws")
def test_sign_true_toward_loopback_still_requires_a_region_and_credentials(
    shared_runner: Runner, monkeypatch: pytest.MonkeyPatch
):
    with pytest.raises(NotConfigured) as no_region:
        MemoryClient.over_http(shared_runner.base_url, sign=True)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    observed = Observed()
    client = MemoryClient.over_http(shared_runner.base_url, sign=True, http_session=observed)
    with pytest.raises(NotConfigured) as no_credentials:
        client.converse("demo", _contact(), "Hello")

    assert no_region.value.code == "no_region"
    assert no_credentials.value.code == "no_credentials"
    assert observed.sent == []


@pytest.mark.usefixtures("no_aws")
def test_a_remote_api_without_credentials_raises_the_clients_own_error_saying_what_to_set():
    observed = Observed()
    sleeps: list[float] = []
    client = MemoryClient.over_http(REMOTE_API, http_session=observed, sleep=sleeps.append)

    with pytest.raises(NotConfigured) as raised:
        client.converse("demo", _contact(), "Hello")

    error = raised.value
    assert isinstance(error, MemoryServiceError)
    assert not isinstance(error, BotoCoreError)
    assert isinstance(error.__cause__, NoCredentialsError)
    assert (error.status, error.code) == (0, "no_credentials")
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        assert variable in error.message
    assert "https://abc123.execute-api.eu-west-1.amazonaws.com/prod" in error.message
    assert str(error).startswith("no_credentials: no AWS credentials for requests to https://")
    assert (observed.sent, sleeps) == ([], []), "nothing sent, nothing retried"


@pytest.mark.usefixtures("no_aws")
def test_a_remote_url_without_a_region_names_aws_default_region_which_botocore_reads(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # read by other SDKs, not by botocore

    with pytest.raises(NotConfigured) as raised:
        MemoryClient.over_http("https://memory.example.com/prod/", session=_session())

    assert raised.value.code == "no_region"
    assert "AWS_DEFAULT_REGION" in raised.value.message
    assert "region=" in raised.value.message
    assert "not AWS_REGION" in raised.value.message
    # Following the advice is enough.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    answer = CannedResponse(200, b'{"counters": {}}')
    scripted = Scripted([answer])
    client = MemoryClient.over_http(
        "https://memory.example.com/prod/", session=_session(), http_session=scripted
    )
    client.memory("demo", "c-1")
    (request,) = scripted.inner.sent
    assert "/eu-west-1/execute-api/aws4_request" in request.headers["Authorization"]


@pytest.mark.usefixtures("no_aws")
def test_partial_credentials_and_a_missing_profile_raise_not_configured(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    client = MemoryClient.over_http(REMOTE_API, http_session=Observed())
    with pytest.raises(NotConfigured) as partial:
        client.memory("demo", "c-1")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(NotConfigured) as no_profile:
        MemoryClient.over_http("https://memory.example.com/")

    assert partial.value.code == "partial_credentials"
    assert isinstance(partial.value.__cause__, PartialCredentialsError)
    assert "AWS_SECRET_ACCESS_KEY" in partial.value.message
    assert no_profile.value.code == "profile_not_found"
    assert "no-such-profile" in no_profile.value.message


@pytest.mark.usefixtures("no_aws")
def test_sign_false_is_the_only_way_to_send_unsigned_to_a_remote_url():
    scripted = Scripted([CannedResponse(200, b'{"counters": {}}')])
    client = MemoryClient.over_http(REMOTE_API, sign=False, http_session=scripted)

    client.memory("demo", "c-1")

    (request,) = scripted.inner.sent
    assert "Authorization" not in request.headers


# -- the package -------------------------------------------------------------------------


def test_the_client_builds_offline_into_a_wheel_that_needs_only_botocore(tmp_path: Path):
    # A copy, so the in-tree build leaves nothing (build/, *.egg-info) in the repository.
    source = tmp_path / "client"
    shutil.copytree(
        REPO_ROOT / "client",
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]

    build = [*pip, "wheel", str(source), "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run(
        [*build, "--wheel-dir", str(wheels)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("conversation_memory_client-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())

    for module in (
        "__init__",
        "agent_turns",
        "client",
        "configuration",
        "errors",
        "langchain",
        "openai_agents",
        "results",
        "scripted",
        "strands",
        "transports",
    ):
        assert f"conversation_memory_client/{module}.py" in names
    assert "conversation_memory_client/py.typed" in names
    assert metadata["Name"] == "conversation-memory-client"
    requirements = metadata.get_all("Requires-Dist") or []
    assert [r for r in requirements if "extra ==" not in r] == ["botocore>=1.34"]
    # Each framework's adapter needs its framework, and nothing of the others.
    by_extra: dict[str, list[str]] = {}
    for requirement in requirements:
        found = re.fullmatch(r'([A-Za-z0-9_.-]+)[^;]*; extra == "([a-z-]+)"', requirement)
        if found:
            by_extra.setdefault(found.group(2), []).append(found.group(1))
    assert by_extra == {
        "strands": ["strands-agents"],
        "langchain": ["langchain", "langgraph"],
        "openai-agents": ["openai-agents"],
    }
    assert sorted(metadata.get_all("Provides-Extra") or []) == [
        "langchain",
        "openai-agents",
        "strands",
    ]

    # Installed from the wheel alone, with no index, the package imports from there.
    target = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    imported = subprocess.run(
        [sys.executable, "-c", "import conversation_memory_client as c; print(c.__file__)"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target)},
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.stdout.startswith(str(target))
