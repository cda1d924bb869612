"""SPEC 8: the tenant a call acts for comes from the caller, never from the path alone."""

import pytest

from tests.integration.conftest import AGENT_ROLE

SESSION = "arn:aws:sts::123456789012:assumed-role/acme-agent/session-1"


@pytest.fixture
def guarded(make_api):
    return make_api(CALLER_IDENTITY="required")


def test_a_mapped_caller_acts_for_its_tenant(guarded):
    assert guarded.converse("hello", tenant="guarded", caller=AGENT_ROLE)[0] == 200
    assert guarded.converse("again", tenant="guarded", caller=SESSION)[0] == 200


@pytest.mark.parametrize(
    "request_for",
    [
        lambda api, who: api.converse("let me in", tenant="other", caller=who),
        lambda api, who: api.reply("let me in", tenant="other", caller=who),
        lambda api, who: api.request("GET", "/v1/tenants/other/contacts/c1/memory", caller=who),
        lambda api, who: api.request("GET", "/v1/tenants/other/contacts/c1/turns", caller=who),
        lambda api, who: api.request("GET", "/v1/tenants/other/contacts", caller=who),
        lambda api, who: api.request("DELETE", "/v1/tenants/other/contacts/c1", caller=who),
        lambda api, who: api.request("GET", "/v1/tenants/other/contacts/c1/window", caller=who),
        lambda api, who: api.request(
            "POST", "/v1/tenants/other/contacts/c1/recall", {"query": "secret"}, caller=who
        ),
    ],
    ids=["converse", "record", "memory", "export", "contacts", "erase", "window", "recall"],
)
def test_a_caller_of_tenant_a_asking_for_tenant_b_gets_403_and_nothing_is_touched(
    guarded, request_for
):
    guarded.converse("mine", tenant="guarded", caller=AGENT_ROLE)
    before = guarded.items()
    status, answer = request_for(guarded, AGENT_ROLE)
    assert status == 403
    assert answer["error"]["code"] == "forbidden"
    assert guarded.items() == before


def test_without_an_identity_nothing_is_served_when_identity_is_required(guarded):
    status, _ = guarded.converse("anonymous", tenant="guarded", caller=None)
    assert status == 403
    assert guarded.items() == []


def test_a_tenant_that_lists_no_callers_admits_none_when_identity_is_required(guarded):
    assert guarded.converse("hello", tenant="acme", caller=AGENT_ROLE)[0] == 403


def test_conversations_of_two_tenants_never_mix(api):
    api.converse("acme's secret", tenant="acme", contact="same-contact")
    _, body = api.converse("what did I say?", tenant="roomy", contact="same-contact")
    assert body["history"] == []
    assert body["turnCount"] == 1
    for tenant, found in (("roomy", []), ("acme", [[{"text": "acme's secret"}]])):
        _, recalled = api.request(
            "POST", f"/v1/tenants/{tenant}/contacts/same-contact/recall", {"query": "secret"}
        )
        assert [p["turn"]["content"] for p in recalled["passages"]] == found
