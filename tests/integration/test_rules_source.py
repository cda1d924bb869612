"""SPEC 3 "Reload": the rules file (SIGHUP) and AppConfig (Powertools cache age) sources.

Bad rules at start fail the start; a bad reload keeps the last good rules and
hands the reason, naming tenant and field, to `on_rejected`.
"""

from __future__ import annotations

import functools
import json
import os
import signal
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped, unused-ignore]
import pytest
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.parameters import appconfig as appconfig_provider
from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS
from botocore.stub import Stubber  # type: ignore[import-untyped, unused-ignore]
from moto import mock_aws
from moto.backend_index import backend_url_patterns

from adapters.rules_source import AppConfigRulesSource, FileRulesSource, RulesUnavailable
from memory_core.rules import InvalidRules, RulesDocument
from tests.support.appconfig_stub import (
    APP,
    ENV,
    PROFILE,
    configuration,
    expect_configuration,
    expect_session,
    stubbed_provider,
)

RETENTION = 30


def _rules(history_days: int, tenant: str = "acme") -> dict[str, Any]:
    return {"tenants": {tenant: {"historyDays": history_days}}}


def _history_days(rules: RulesDocument, tenant: str = "acme") -> int:
    tenant_rules = rules.for_tenant(tenant)
    assert tenant_rules is not None
    return tenant_rules.history_days


BAD_HISTORY_DAYS = _rules(0)
ABOVE_RETENTION = _rules(RETENTION + 1)
UNKNOWN_FIELD = {"tenants": {"acme": {"historyDayz": 7}}}

# Documents Python's json.loads accepts, keeping the last of the two equal keys:
# each would be served as valid rules, with the first value silently dropped.
DUPLICATE_KEYS = [
    pytest.param('{"tenants": {"acme": {"historyDays": 14}}, "tenants": {}}', "tenants", id="top"),
    pytest.param('{"tenants": {"acme": {"historyDays": 7}, "acme": {}}}', "acme", id="tenant"),
    pytest.param(
        '{"tenants": {"acme": {"historyDays": 7, "historyDays": 30}}}', "historyDays", id="field"
    ),
    pytest.param(
        '{"tenants": {"acme": {"rateLimit": {"messages": 5, "perSeconds": 60, "messages": 50}}}}',
        "messages",
        id="nested",
    ),
]


@pytest.fixture
def rejections() -> list[str]:
    return []


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(_rules(14)), encoding="utf-8")
    return path


@pytest.fixture
def file_source(rules_file: Path, rejections: list[str]) -> FileRulesSource:
    return FileRulesSource(rules_file, RETENTION, rejections.append)


def _write(path: Path, document: Any) -> None:
    path.write_text(document if isinstance(document, str) else json.dumps(document), "utf-8")


# --- the rules file -------------------------------------------------------------------


def test_a_good_file_is_served(file_source):
    assert _history_days(file_source.current()) == 14


def test_a_missing_file_fails_the_start_naming_the_file(tmp_path, rejections):
    missing = tmp_path / "absent.json"
    with pytest.raises(InvalidRules, match="No such file") as refused:
        FileRulesSource(missing, RETENTION, rejections.append)
    assert str(missing) in str(refused.value)
    assert rejections == []  # a failed start is the caller's exception, not a reload


def test_a_file_that_is_not_json_fails_the_start(rules_file, rejections):
    _write(rules_file, '{"tenants": {')
    with pytest.raises(InvalidRules, match="is not JSON") as refused:
        FileRulesSource(rules_file, RETENTION, rejections.append)
    assert str(rules_file) in str(refused.value)


def test_a_file_that_is_not_utf8_fails_the_start(rules_file, rejections):
    rules_file.write_bytes(b'{"tenants": {"\xff": {}}}')
    with pytest.raises(InvalidRules, match="not UTF-8") as refused:
        FileRulesSource(rules_file, RETENTION, rejections.append)
    assert str(rules_file) in str(refused.value)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (BAD_HISTORY_DAYS, "field historyDays: must be a positive integer"),
        (ABOVE_RETENTION, "field historyDays: must be <= TURN_RETENTION_DAYS (30)"),
        (UNKNOWN_FIELD, "field historyDayz: unknown field"),
    ],
)
def test_invalid_rules_fail_the_start_naming_file_tenant_and_field(
    rules_file, rejections, document, field
):
    _write(rules_file, document)
    with pytest.raises(InvalidRules) as refused:
        FileRulesSource(rules_file, RETENTION, rejections.append)
    reason = str(refused.value)
    assert reason.startswith(f"{rules_file}: invalid rules: ")
    assert f"tenant 'acme', {field}" in reason


@pytest.mark.parametrize(("text", "key"), DUPLICATE_KEYS)
def test_a_key_given_twice_fails_the_start_naming_the_file_and_the_key(
    rules_file, rejections, text, key
):
    json.loads(text)  # Python's own parser lets it through
    _write(rules_file, text)
    with pytest.raises(InvalidRules) as refused:
        FileRulesSource(rules_file, RETENTION, rejections.append)
    assert str(refused.value) == f"{rules_file}: duplicate key {key!r}"
    assert rejections == []


def test_a_reload_applies_the_edited_rules(file_source, rules_file, rejections):
    _write(rules_file, {"tenants": {"acme": {"historyDays": 7}, "globex": {}}})
    assert file_source.reload() is True
    rules = file_source.current()
    assert _history_days(rules) == 7
    assert _history_days(rules, "globex") == 30
    assert rejections == []


@pytest.mark.parametrize(
    ("document", "expected_reason"),
    [
        (BAD_HISTORY_DAYS, "tenant 'acme', field historyDays: must be a positive integer"),
        (UNKNOWN_FIELD, "tenant 'acme', field historyDayz: unknown field"),
        ("not json", "is not JSON"),
    ],
)
def test_a_bad_reload_keeps_the_last_good_rules_and_reports_why(
    file_source, rules_file, rejections, document, expected_reason
):
    served = file_source.current()
    _write(rules_file, document)
    assert file_source.reload() is False
    assert file_source.current() is served
    assert len(rejections) == 1
    assert rejections[0].startswith(f"{rules_file}: ")
    assert expected_reason in rejections[0]


def test_a_reload_of_a_deleted_file_keeps_the_last_good_rules(file_source, rules_file, rejections):
    rules_file.unlink()
    assert file_source.reload() is False
    assert _history_days(file_source.current()) == 14
    assert rejections == [f"{rules_file}: cannot be read: No such file or directory"]


def test_good_rules_after_a_bad_reload_apply(file_source, rules_file, rejections):
    _write(rules_file, BAD_HISTORY_DAYS)
    file_source.reload()
    _write(rules_file, _rules(21))
    assert file_source.reload() is True
    assert _history_days(file_source.current()) == 21
    assert len(rejections) == 1


@pytest.mark.parametrize(("text", "key"), DUPLICATE_KEYS)
def test_a_reload_with_a_key_given_twice_keeps_the_last_good_rules(
    file_source, rules_file, rejections, text, key
):
    served = file_source.current()
    _write(rules_file, text)
    assert file_source.reload() is False
    assert file_source.current() is served
    assert rejections == [f"{rules_file}: duplicate key {key!r}"]


@pytest.fixture
def restore_sighup():
    previous = signal.getsignal(signal.SIGHUP)
    yield
    signal.signal(signal.SIGHUP, previous)


@pytest.mark.usefixtures("restore_sighup")
def test_sighup_reloads_the_file(file_source, rules_file, rejections):
    file_source.install_sighup_reload()
    _write(rules_file, _rules(3))
    assert _history_days(file_source.current()) == 14  # nothing changes before the signal
    os.kill(os.getpid(), signal.SIGHUP)
    assert _history_days(file_source.current()) == 3
    assert rejections == []


@pytest.mark.usefixtures("restore_sighup")
def test_sighup_with_a_bad_file_keeps_the_last_good_rules(file_source, rules_file, rejections):
    file_source.install_sighup_reload()
    _write(rules_file, ABOVE_RETENTION)
    os.kill(os.getpid(), signal.SIGHUP)
    assert _history_days(file_source.current()) == 14
    assert len(rejections) == 1
    assert "tenant 'acme', field historyDays" in rejections[0]


@pytest.mark.usefixtures("restore_sighup")
def test_sighup_with_a_key_given_twice_keeps_the_last_good_rules(
    file_source, rules_file, rejections
):
    file_source.install_sighup_reload()
    _write(rules_file, '{"tenants": {"acme": {"historyDays": 3}}, "tenants": {}}')
    os.kill(os.getpid(), signal.SIGHUP)
    assert _history_days(file_source.current()) == 14
    assert rejections == [f"{rules_file}: duplicate key 'tenants'"]


# --- AppConfig, through an injected fetch ---------------------------------------------


class FakeAppConfig:
    """What Powertools' untransformed get_app_config returns (or raises), and how often.

    That is the configuration's bytes: a document assigned is served as its
    JSON, the same bytes object until the next assignment (as from Powertools'
    cache); bytes or text assigned are served as they are.
    """

    def __init__(self, document: Any) -> None:
        self.document = document
        self.error: Exception | None = None
        self.calls = 0

    @property
    def document(self) -> bytes | str:
        return self._raw

    @document.setter
    def document(self, document: Any) -> None:
        self._raw = document if isinstance(document, bytes | str) else json.dumps(document).encode()

    def __call__(self) -> bytes | str:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self._raw


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _appconfig_source(
    fetch: FakeAppConfig, rejections: list[str], clock: FakeClock
) -> AppConfigRulesSource:
    return AppConfigRulesSource(
        APP,
        ENV,
        PROFILE,
        RETENTION,
        rejections.append,
        max_age_seconds=45,
        fetch=fetch,
        clock=clock,
    )


WHERE = f"AppConfig {APP}/{ENV}/{PROFILE}"


def test_a_good_document_is_served_and_parsed_once(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    first = source.current()
    assert _history_days(first) == 14
    assert source.current() is first  # the same cached object: not parsed again
    fetch.document = _rules(14)  # an equal document, as after Powertools' cache expires
    assert source.current() is first
    assert fetch.calls == 3
    assert rejections == []


def test_a_changed_document_is_applied(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    source.current()
    fetch.document = {"tenants": {"acme": {"historyDays": 5}, "globex": {}}}
    rules = source.current()
    assert _history_days(rules) == 5
    assert rules.for_tenant("globex") is not None
    assert rejections == []


def test_an_invalid_document_keeps_the_last_good_rules_and_is_reported_once(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    good = source.current()
    fetch.document = ABOVE_RETENTION
    assert source.current() is good
    assert rejections == [
        f"{WHERE}: invalid rules: tenant 'acme', field historyDays: must be <= "
        "TURN_RETENTION_DAYS (30): transcripts must be kept at least historyDays (got 31)"
    ]
    # Still deployed: still refused, without a report per request.
    fetch.document = json.loads(json.dumps(ABOVE_RETENTION))
    assert source.current() is good
    assert len(rejections) == 1
    # A fix deployed afterwards applies.
    fetch.document = _rules(9)
    assert _history_days(source.current()) == 9
    assert len(rejections) == 1


def test_a_failed_fetch_keeps_the_last_good_rules_and_waits_before_retrying(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    good = source.current()
    fetch.error = parameters.GetParameterError("Could not connect to the endpoint URL")
    assert source.current() is good
    assert rejections == [
        f"{WHERE}: cannot be fetched: GetParameterError: Could not connect to the endpoint URL"
    ]
    calls = fetch.calls
    clock.now += 44
    assert source.current() is good
    assert fetch.calls == calls  # within the cache age, no new attempt
    clock.now += 1
    fetch.error = None
    fetch.document = _rules(8)
    assert _history_days(source.current()) == 8
    assert fetch.calls == calls + 1
    assert len(rejections) == 1


def test_any_exception_from_the_fetch_keeps_the_last_good_rules(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    good = source.current()
    fetch.error = KeyError("Configuration")
    assert source.current() is good
    assert len(rejections) == 1
    assert "KeyError" in rejections[0]


def test_without_any_good_document_a_failed_fetch_raises(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    fetch.error = parameters.GetParameterError("AccessDenied")
    source = _appconfig_source(fetch, rejections, clock)
    with pytest.raises(RulesUnavailable, match=f"^{WHERE}: cannot be fetched: .*AccessDenied"):
        source.current()
    # Nothing to serve, so no waiting: the next request tries again.
    fetch.error = None
    assert _history_days(source.current()) == 14
    assert rejections == []  # the exception carries the reason; the caller reports it


def test_without_any_good_document_an_invalid_one_raises_naming_the_field(rejections, clock):
    fetch = FakeAppConfig(UNKNOWN_FIELD)
    source = _appconfig_source(fetch, rejections, clock)
    for _ in range(2):
        with pytest.raises(RulesUnavailable, match="tenant 'acme', field historyDayz"):
            source.current()
    assert rejections == []


@pytest.mark.parametrize(("text", "key"), DUPLICATE_KEYS)
def test_a_document_with_a_key_given_twice_is_refused_naming_the_key(rejections, clock, text, key):
    json.loads(text)  # what Powertools' transform="json" would have served as valid
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    good = source.current()
    fetch.document = text.encode()
    assert source.current() is good
    assert source.current() is good
    assert rejections == [f"{WHERE}: duplicate key {key!r}"]  # once per document deployed


@pytest.mark.parametrize(("text", "key"), DUPLICATE_KEYS)
def test_without_any_good_document_a_key_given_twice_raises_naming_it(rejections, clock, text, key):
    source = _appconfig_source(FakeAppConfig(text.encode()), rejections, clock)
    with pytest.raises(RulesUnavailable) as refused:
        source.current()
    assert str(refused.value) == f"{WHERE}: duplicate key {key!r}"
    assert rejections == []


@pytest.mark.parametrize(
    ("raw", "expected_reason"),
    [
        (b'{"tenants": {"\xff": {}}}', "is not UTF-8 text: "),
        (b'{"tenants": {', "is not JSON: "),
        (b"", "is not JSON: "),
        (b'{"tenants": {"acme": {"historyDays": NaN}}}', "is not JSON: NaN and Infinity"),
        (b'{"tenants": {"acme": {"historyDays": 1e400}}}', "is not JSON: a number is too large"),
    ],
    ids=["not-utf8", "cut", "empty", "nan", "huge"],
)
def test_a_document_that_is_not_utf8_json_keeps_the_last_good_rules(
    rejections, clock, raw, expected_reason
):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    good = source.current()
    fetch.document = raw
    assert source.current() is good
    assert len(rejections) == 1
    assert rejections[0].startswith(f"{WHERE}: {expected_reason}")
    fetch.document = _rules(9)  # a fix deployed afterwards applies
    assert _history_days(source.current()) == 9


# --- AppConfig, through the real Powertools get_app_config ----------------------------


@pytest.fixture
def aws_environment(monkeypatch):
    for name, value in {
        "POWERTOOLS_SERVICE_NAME": "conversation-memory",
        "POWERTOOLS_METRICS_NAMESPACE": "ConversationMemory",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    # Powertools keeps one provider, bound to the first application and
    # environment, and its cache in process-wide state.
    parameters.clear_caches()  # type: ignore[no-untyped-call, unused-ignore]
    yield
    parameters.clear_caches()  # type: ignore[no-untyped-call, unused-ignore]


def _stubbed_app_config(monkeypatch, rejections) -> tuple[Stubber, AppConfigRulesSource]:
    """A source over Powertools' own AppConfig provider, whose first session serves
    `historyDays` 14 and hands over the next token, `token-2`."""
    stub = stubbed_provider(monkeypatch)
    expect_session(stub, "token-1")
    expect_configuration(stub, _rules(14), "token-1", "token-2")
    return stub, AppConfigRulesSource(APP, ENV, PROFILE, RETENTION, rejections.append)


@pytest.mark.usefixtures("aws_environment")
def test_powertools_get_app_config_serves_caches_and_reloads(monkeypatch, rejections):
    stub, source = _stubbed_app_config(monkeypatch, rejections)
    with stub:
        first = source.current()
        assert _history_days(first) == 14
        # Within the cache age Powertools answers without calling AppConfig
        # (the stub would fail on an unexpected call).
        assert source.current() is first
        stub.assert_no_pending_responses()

        # The cache age runs out, and a new deployment is there.
        DEFAULT_PROVIDERS["appconfig"].clear_cache()
        stub.add_response(
            "get_latest_configuration",
            configuration(_rules(6), "token-3"),
            {"ConfigurationToken": "token-2"},
        )
        second = source.current()
        assert _history_days(second) == 6

        # Nothing new deployed: AppConfig answers with no content, Powertools
        # hands back the last value, equal to what is already served.
        DEFAULT_PROVIDERS["appconfig"].clear_cache()
        stub.add_response(
            "get_latest_configuration",
            configuration(None, "token-4"),
            {"ConfigurationToken": "token-3"},
        )
        assert source.current() is second

        # AppConfig fails: the last good rules stay.
        DEFAULT_PROVIDERS["appconfig"].clear_cache()
        stub.add_client_error("get_latest_configuration", "ThrottlingException", "Rate exceeded")
        assert source.current() is second
        stub.assert_no_pending_responses()
    assert len(rejections) == 1
    assert rejections[0].startswith(f"AppConfig {APP}/{ENV}/{PROFILE}: cannot be fetched: ")
    assert "ThrottlingException" in rejections[0]


def _moto_serves_appconfigdata() -> bool:
    return any(service == "appconfigdata" for service, _ in backend_url_patterns)


@pytest.mark.skipif(
    not _moto_serves_appconfigdata(),
    reason="moto (5.2.5) has no AppConfigData backend (StartConfigurationSession, "
    "GetLatestConfiguration) and its AppConfig backend has no environments or deployments",
)
@pytest.mark.usefixtures("aws_environment")
@mock_aws
def test_powertools_get_app_config_under_moto(rejections):
    appconfig = boto3.client("appconfig")
    application = appconfig.create_application(Name=APP)["Id"]
    environment = appconfig.create_environment(ApplicationId=application, Name=ENV)["Id"]
    profile = appconfig.create_configuration_profile(
        ApplicationId=application, Name=PROFILE, LocationUri="hosted"
    )["Id"]
    version = appconfig.create_hosted_configuration_version(
        ApplicationId=application,
        ConfigurationProfileId=profile,
        Content=json.dumps(_rules(14)).encode(),
        ContentType="application/json",
    )["VersionNumber"]
    strategy = appconfig.create_deployment_strategy(
        Name="all-at-once",
        DeploymentDurationInMinutes=0,
        GrowthFactor=100,
        FinalBakeTimeInMinutes=0,
        ReplicateTo="NONE",
    )["Id"]
    appconfig.start_deployment(
        ApplicationId=application,
        EnvironmentId=environment,
        DeploymentStrategyId=strategy,
        ConfigurationProfileId=profile,
        ConfigurationVersion=str(version),
    )
    source = AppConfigRulesSource(APP, ENV, PROFILE, RETENTION, rejections.append)
    assert _history_days(source.current()) == 14
    assert rejections == []


@pytest.mark.usefixtures("aws_environment")
def test_powertools_get_app_config_with_a_key_given_twice_keeps_the_last_good_rules(
    monkeypatch, rejections
):
    # Powertools' transform="json" would parse this with json.loads and serve
    # an empty tenant list: the source reads the bytes itself, strictly.
    stub, source = _stubbed_app_config(monkeypatch, rejections)
    duplicated = b'{"tenants": {"acme": {"historyDays": 14}}, "tenants": {}}'
    with stub:
        good = source.current()
        DEFAULT_PROVIDERS["appconfig"].clear_cache()
        stub.add_response(
            "get_latest_configuration",
            configuration(duplicated, "token-3"),
            {"ConfigurationToken": "token-2"},
        )
        assert source.current() is good
        # Still deployed (AppConfig answers with no content; Powertools hands
        # back the same bytes): still refused, reported once.
        DEFAULT_PROVIDERS["appconfig"].clear_cache()
        stub.add_response(
            "get_latest_configuration",
            configuration(None, "token-4"),
            {"ConfigurationToken": "token-3"},
        )
        assert source.current() is good
        stub.assert_no_pending_responses()
    assert rejections == [f"{WHERE}: duplicate key 'tenants'"]


# --- After a SnapStart restore ---------------------------------------------------------


def test_renew_fetches_at_once_though_a_failed_fetch_had_set_a_wait(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    source.current()
    fetch.error = parameters.GetParameterError("Could not connect to the endpoint URL")
    source.current()  # fails: the next attempt waits 45 s of the snapshot's clock
    fetch.error = None
    fetch.document = _rules(6)
    calls = fetch.calls
    source.renew()  # the restored environment's clock is not the snapshot's
    assert fetch.calls == calls + 1
    assert _history_days(source.current()) == 6


def test_renew_with_appconfig_down_keeps_the_last_good_rules_and_says_why(rejections, clock):
    fetch = FakeAppConfig(_rules(14))
    source = _appconfig_source(fetch, rejections, clock)
    good = source.current()
    fetch.error = parameters.GetParameterError("Could not connect to the endpoint URL")
    source.renew()  # a restore hook that raised would fail the restore
    assert source.current() is good
    assert rejections == [
        f"{WHERE}: cannot be fetched: GetParameterError: Could not connect to the endpoint URL"
    ]


@pytest.mark.usefixtures("aws_environment")
def test_after_a_restore_a_new_appconfig_session_serves_the_rules_deployed_since(
    monkeypatch, rejections
):
    # The snapshot: a session started, the rules fetched, the next token kept.
    stub, source = _stubbed_app_config(monkeypatch, rejections)
    with stub:
        assert _history_days(source.current()) == 14
    # Restored days later: the snapshot's token has expired (it lives 24 hours), its
    # cached document with it; a new session must start, and it sees today's rules.
    stub.add_client_error("get_latest_configuration", "BadRequestException", "Token expired")
    restored_client = boto3.client("appconfigdata")
    restored = Stubber(restored_client)
    expect_session(restored, "token-9")
    expect_configuration(restored, _rules(6), "token-9", "token-10")
    monkeypatch.setattr(
        appconfig_provider,
        "AppConfigProvider",
        functools.partial(parameters.AppConfigProvider, boto3_client=restored_client),
    )
    with stub, restored:
        source.renew()
        assert _history_days(source.current()) == 6
        restored.assert_no_pending_responses()
    assert rejections == []
