"""The converse handler under SnapStart: what its after-restore hook renews, and that it serves on.

Lambda runs the hooks a module registered with `snapshot_restore_py` after
each restore, before the first invocation; these tests run them the same way.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest
from aws_lambda_powertools.utilities import parameters
from snapshot_restore_py import get_after_restore, get_before_snapshot

from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import Api
from tests.support.appconfig_stub import (
    APP,
    ENV,
    PROFILE,
    configuration,
    expect_session,
    stubbed_provider,
)


def renewals_of(handler: Any) -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    """The hooks this import of the handler registered (earlier imports registered their own)."""
    return [
        (hook, args, kwargs)
        for hook, args, kwargs in get_after_restore()
        if args and any(connection is handler.DYNAMODB for connection in args[0])
    ]


def restore(handler: Any) -> None:
    for hook, args, kwargs in renewals_of(handler):
        hook(*args, **kwargs)


def fill_until_compaction_is_requested(api: Api, contact: str = "c1") -> None:
    for n in range(15):  # past the fold's turn trigger
        api.converse(f"message {n}", contact=contact)
    assert api.queued()


def test_the_handler_registers_one_renewal_of_its_clients(api):
    registered = renewals_of(api.handler)
    assert len(registered) == 1
    _, (connections, caches), _ = registered[0]
    assert connections == (api.handler.DYNAMODB, api.handler.QUEUE)
    assert caches == ()  # rules from a file: nothing in them wears out


def test_after_a_restore_the_service_serves_on_fresh_connections(api, monkeypatch):
    fill_until_compaction_is_requested(api)
    assert api.handler.QUEUE._client is not None
    closed: list[str] = []
    close = api.handler.DYNAMODB.close

    def spied_close() -> None:
        closed.append("dynamodb")
        close()

    monkeypatch.setattr(api.handler.DYNAMODB, "close", spied_close)
    restore(api.handler)
    assert closed == ["dynamodb"]
    assert api.handler.QUEUE._client is None  # the next request makes a new client
    status, body = api.converse("after the restore")
    assert status == 200
    assert body["converse"]["messages"][-1]["content"][-1] == {"text": "after the restore"}
    fill_until_compaction_is_requested(api, contact="c2")
    assert api.handler.QUEUE._client is not None


def test_two_environments_restored_from_one_snapshot_back_off_differently(api):
    snapshot = random.getstate()
    restore(api.handler)
    first = [random.uniform(0, 0.25) for _ in range(3)]  # as the commit's backoff draws
    random.setstate(snapshot)
    restore(api.handler)
    assert [random.uniform(0, 0.25) for _ in range(3)] != first


def test_an_api_call_leaves_the_workflow_protocol_unloaded_and_a_snapshot_holds_it(api):
    protocol = "converse_history.direct_invocation"
    assert api.converse("hello")[0] == 200
    assert protocol not in sys.modules
    for hook, args, kwargs in get_before_snapshot():
        if hook is api.handler.direct_invocation:  # this import's, as Lambda runs it
            hook(*args, **kwargs)
    assert protocol in sys.modules
    assert api.handler.DIRECT_ACTION == sys.modules[protocol].ACTION
    answer = api.handler.lambda_handler(
        {"action": "converse", "tenantId": "acme", "contactId": "c1", "message": {"text": "hi"}},
        LambdaContextStandIn(),
    )
    assert answer["decision"] == "model"


@pytest.fixture
def appconfig_rules(monkeypatch: pytest.MonkeyPatch) -> Any:
    """AppConfig as the cold start finds it: a session, then the rules (stubbed, no network)."""
    parameters.clear_caches()  # type: ignore[no-untyped-call, unused-ignore]
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    stub = stubbed_provider(monkeypatch)
    expect_session(stub, "token-1")
    stub.add_response("get_latest_configuration", configuration({"tenants": {"acme": {}}}, "t-2"))
    with stub:
        yield
    parameters.clear_caches()  # type: ignore[no-untyped-call, unused-ignore]


@pytest.mark.usefixtures("appconfig_rules")
def test_with_rules_from_appconfig_the_renewal_renews_the_rules_too(make_api):
    api = make_api(
        RULES_SOURCE="appconfig",
        APPCONFIG_APPLICATION=APP,
        APPCONFIG_ENVIRONMENT=ENV,
        APPCONFIG_PROFILE=PROFILE,
    )
    [(_, (connections, caches), _)] = renewals_of(api.handler)
    assert connections == (api.handler.DYNAMODB, api.handler.QUEUE)
    assert caches == (api.handler.RULES,)
