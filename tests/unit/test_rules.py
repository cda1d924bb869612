"""SPEC 3: the tenants' rules document, its defaults and its refusals."""

import json
from pathlib import Path
from typing import Any

import pytest

from memory_core.rules import InvalidRules, RateLimit, RulesDocument, TenantRules, parse_rules

RULES_EXAMPLE = Path(__file__).resolve().parents[2] / "rules.example.json"
RETENTION = 30
AGENT = "arn:aws:iam::123456789012:role/agent"


def _one_tenant(rules: dict[str, Any], tenant: str = "acme") -> dict[str, Any]:
    return {"tenants": {tenant: rules}}


def _refusal(document: Any, retention: int = RETENTION) -> str:
    with pytest.raises(InvalidRules) as refused:
        parse_rules(document, retention)
    return str(refused.value)


def test_an_empty_tenant_gets_every_default():
    rules = parse_rules(_one_tenant({}), RETENTION).tenants["acme"]
    assert rules.history_days == 30
    assert rules.idle_reset_hours == 24
    assert rules.max_turns_per_conversation == 25
    assert rules.rate_limit is None
    assert rules.callers == []


def test_rules_without_history_days_or_idle_reset_load_30_and_24():
    # Seed 002's verification table: "A rules.json without either field loads with 30 and 24".
    rules = parse_rules(_one_tenant({"maxTurnsPerConversation": 12}), RETENTION).tenants["acme"]
    assert (rules.history_days, rules.idle_reset_hours) == (30, 24)
    assert rules.max_turns_per_conversation == 12


def test_every_field_is_read():
    document = _one_tenant(
        {
            "historyDays": 14,
            "idleResetHours": 6,
            "maxTurnsPerConversation": 40,
            "rateLimit": {"messages": 20, "perSeconds": 60},
            "callers": [AGENT, "arn:aws:sts::210987654321:assumed-role/broker/session-1"],
        }
    )
    rules = parse_rules(document, RETENTION).tenants["acme"]
    assert rules == TenantRules(
        historyDays=14,
        idleResetHours=6,
        maxTurnsPerConversation=40,
        rateLimit=RateLimit(messages=20, perSeconds=60),
        callers=[AGENT, "arn:aws:sts::210987654321:assumed-role/broker/session-1"],
    )
    assert rules.rate_limit == RateLimit(messages=20, perSeconds=60)
    assert rules.rate_limit is not None
    assert (rules.rate_limit.messages, rules.rate_limit.per_seconds) == (20, 60)


def test_every_tenant_is_kept_under_its_own_id():
    document = {"tenants": {"acme": {"historyDays": 3}, "globex_2": {}, "A": {"idleResetHours": 1}}}
    rules = parse_rules(document, RETENTION)
    assert sorted(rules.tenants) == ["A", "acme", "globex_2"]
    assert rules.tenants["acme"].history_days == 3
    assert rules.tenants["globex_2"].history_days == 30
    assert rules.tenants["A"].idle_reset_hours == 1


def test_a_tenant_is_found_by_id_and_an_unlisted_one_is_not():
    rules = parse_rules({"tenants": {"acme": {"maxTurnsPerConversation": 3}}}, RETENTION)
    found = rules.for_tenant("acme")
    assert found is not None
    assert found.max_turns_per_conversation == 3
    assert rules.for_tenant("globex") is None
    assert rules.for_tenant("ACME") is None


def test_no_tenants_at_all_is_an_empty_document():
    assert parse_rules({"tenants": {}}, RETENTION) == RulesDocument(tenants={})


def test_a_large_positive_value_is_accepted():
    rules = parse_rules(_one_tenant({"maxTurnsPerConversation": 10**6}), RETENTION)
    assert rules.tenants["acme"].max_turns_per_conversation == 10**6


NOT_POSITIVE_WHOLE_NUMBERS = [0, -1, 1.5, 30.0, "30", True, False, None, [30], {"days": 30}]
SCALAR_FIELDS = ["historyDays", "idleResetHours", "maxTurnsPerConversation"]


@pytest.mark.parametrize("value", NOT_POSITIVE_WHOLE_NUMBERS, ids=repr)
@pytest.mark.parametrize("field", SCALAR_FIELDS)
def test_a_tenant_field_that_is_not_a_positive_integer_is_refused_by_tenant_and_field(field, value):
    message = _refusal(_one_tenant({field: value}, tenant="campus-advisers"))
    assert "tenant 'campus-advisers'" in message
    assert f"field {field}" in message
    assert f"(got {value!r})" in message


@pytest.mark.parametrize("value", NOT_POSITIVE_WHOLE_NUMBERS, ids=repr)
@pytest.mark.parametrize("field", ["messages", "perSeconds"])
def test_a_rate_limit_field_that_is_not_a_positive_integer_is_refused(field, value):
    limit: dict[str, Any] = {"messages": 20, "perSeconds": 60, field: value}
    message = _refusal(_one_tenant({"rateLimit": limit}, tenant="acme-legal"))
    assert "tenant 'acme-legal'" in message
    assert f"field rateLimit.{field}" in message
    assert f"(got {value!r})" in message


@pytest.mark.parametrize("missing", ["messages", "perSeconds"])
def test_a_rate_limit_needs_both_numbers(missing):
    limit = {"messages": 20, "perSeconds": 60}
    del limit[missing]
    message = _refusal(_one_tenant({"rateLimit": limit}))
    assert "tenant 'acme'" in message
    assert f"field rateLimit.{missing}: required" in message


@pytest.mark.parametrize("value", [20, "20/60", [20, 60], True], ids=repr)
def test_a_rate_limit_that_is_not_an_object_is_refused(value):
    message = _refusal(_one_tenant({"rateLimit": value}))
    assert "tenant 'acme'" in message
    assert "field rateLimit" in message


def test_a_null_rate_limit_is_refused():
    message = _refusal(_one_tenant({"rateLimit": None}))
    assert "field rateLimit" in message


@pytest.mark.parametrize(
    ("callers", "field"),
    [
        (AGENT, "callers"),
        (None, "callers"),
        (True, "callers"),
        ({"arn": AGENT}, "callers"),
        ([5], "callers.0"),
        ([None], "callers.0"),
        (["agent"], "callers.0"),
        ([AGENT, "arn:aws:iam::12345:role/agent"], "callers.1"),
        ([AGENT, "arn:aws:s3:::bucket"], "callers.1"),
        (["arn:aws:iam::123456789012:"], "callers.0"),
        ([" " + AGENT], "callers.0"),
        ([AGENT + " "], "callers.0"),
    ],
    ids=repr,
)
def test_callers_that_are_not_a_list_of_principal_arns_are_refused(callers, field):
    message = _refusal(_one_tenant({"callers": callers}, tenant="demo"))
    assert "tenant 'demo'" in message
    assert f"field {field}" in message


@pytest.mark.parametrize(
    "arn",
    [
        AGENT,
        "arn:aws:iam::123456789012:user/ops@example.com",
        "arn:aws:sts::123456789012:assumed-role/broker/session-1",
        "arn:aws-cn:iam::123456789012:role/agent",
        "arn:aws-us-gov:iam::123456789012:root",
    ],
)
def test_principal_arns_are_accepted_as_callers(arn):
    assert parse_rules(_one_tenant({"callers": [arn]}), RETENTION).tenants["acme"].callers == [arn]


def test_an_empty_callers_list_is_accepted():
    assert parse_rules(_one_tenant({"callers": []}), RETENTION).tenants["acme"].callers == []


@pytest.mark.parametrize(
    "field", ["historydays", "history_days", "idleResetHour", "maxTurns", "rate_limit", "caller"]
)
def test_an_unknown_tenant_field_is_refused_so_a_typo_cannot_become_a_default(field):
    message = _refusal(_one_tenant({field: 7}))
    assert "tenant 'acme'" in message
    assert f"field {field}" in message
    assert "unknown field" in message


@pytest.mark.parametrize("field", ["burst", "per_seconds", "perSecond"])
def test_an_unknown_rate_limit_field_is_refused(field):
    message = _refusal(_one_tenant({"rateLimit": {"messages": 5, "perSeconds": 60, field: 1}}))
    assert "tenant 'acme'" in message
    assert f"field rateLimit.{field}" in message
    assert "unknown field" in message


@pytest.mark.parametrize("field", ["tenant", "version", "$schema"])
def test_an_unknown_top_level_field_is_refused(field):
    message = _refusal({"tenants": {"acme": {}}, field: 1})
    assert f"field {field}" in message
    assert "unknown field" in message


@pytest.mark.parametrize(
    "tenant", ["", "-acme", "_acme", "acme legal", "acme.legal", "acme/legal", "é", "a" * 65]
)
def test_a_bad_tenant_id_is_refused_by_name(tenant):
    message = _refusal({"tenants": {tenant: {}}})
    assert f"tenant {tenant!r}" in message
    assert "tenant id must match" in message


@pytest.mark.parametrize("tenant", ["a", "A1", "acme-legal", "campus_advisers", "a" * 64])
def test_a_good_tenant_id_is_accepted(tenant):
    assert list(parse_rules({"tenants": {tenant: {}}}, RETENTION).tenants) == [tenant]


def test_a_document_without_tenants_is_refused():
    message = _refusal({})
    assert "field tenants: required" in message


@pytest.mark.parametrize("tenants", [None, [], ["acme"], "acme", 1])
def test_tenants_that_are_not_an_object_are_refused(tenants):
    assert "field tenants" in _refusal({"tenants": tenants})


@pytest.mark.parametrize("tenant_rules", [None, [], "defaults", 30, True])
def test_a_tenant_entry_that_is_not_an_object_is_refused(tenant_rules):
    assert "tenant 'acme'" in _refusal({"tenants": {"acme": tenant_rules}})


@pytest.mark.parametrize("document", [None, [], "rules", 30, [{"tenants": {}}]])
def test_a_document_that_is_not_an_object_is_refused(document):
    assert _refusal(document).startswith("invalid rules: document:")


def test_history_days_above_the_retention_is_refused():
    message = _refusal(_one_tenant({"historyDays": 31}, tenant="acme-legal"))
    assert "tenant 'acme-legal'" in message
    assert "field historyDays" in message
    assert "TURN_RETENTION_DAYS (30)" in message
    assert "(got 31)" in message


def test_history_days_equal_to_the_retention_is_accepted():
    rules = parse_rules(_one_tenant({"historyDays": 30}), RETENTION)
    assert rules.tenants["acme"].history_days == 30


def test_a_shorter_retention_lowers_the_bound():
    message = _refusal(_one_tenant({"historyDays": 8}), retention=7)
    assert "tenant 'acme'" in message
    assert "field historyDays" in message
    assert "TURN_RETENTION_DAYS (7)" in message
    assert parse_rules(_one_tenant({"historyDays": 7}), 7).tenants["acme"].history_days == 7


def test_a_longer_retention_raises_the_bound():
    assert parse_rules(_one_tenant({"historyDays": 90}), 90).tenants["acme"].history_days == 90
    assert "TURN_RETENTION_DAYS (90)" in _refusal(_one_tenant({"historyDays": 91}), retention=90)


def test_the_default_history_days_is_bound_by_a_shorter_retention():
    message = _refusal(_one_tenant({}), retention=7)
    assert "tenant 'acme', field historyDays" in message
    assert "TURN_RETENTION_DAYS (7)" in message


def test_every_error_in_a_document_is_reported():
    document = {
        "tenants": {
            "acme": {"historyDays": 0, "idleResetHours": 1.5},
            "globex": {"rateLimit": {"messages": True, "perSeconds": "60", "burst": 3}},
            "initech": {"historyDays": 31, "callers": ["not-an-arn"], "maxturns": 3},
            "bad id": {},
            "fine": {},
        },
        "version": 2,
    }
    message = _refusal(document)
    expected = [
        "tenant 'acme', field historyDays",
        "tenant 'acme', field idleResetHours",
        "tenant 'globex', field rateLimit.messages",
        "tenant 'globex', field rateLimit.perSeconds",
        "tenant 'globex', field rateLimit.burst",
        "tenant 'initech', field historyDays",
        "tenant 'initech', field callers.0",
        "tenant 'initech', field maxturns",
        "tenant 'bad id'",
        "field version",
    ]
    assert [part for part in expected if part not in message] == []
    assert "'fine'" not in message
    assert message.count("; ") == len(expected) - 1


def test_the_example_rules_at_the_repository_root_are_valid():
    rules = parse_rules(json.loads(RULES_EXAMPLE.read_text(encoding="utf-8")), RETENTION)
    assert sorted(rules.tenants) == ["acme-legal", "campus-advisers", "demo"]
    assert rules.tenants["acme-legal"].rate_limit == RateLimit(messages=20, perSeconds=60)
    assert rules.tenants["demo"] == TenantRules()


def test_the_rules_are_frozen():
    rules = parse_rules(_one_tenant({}), RETENTION).tenants["acme"]
    with pytest.raises(ValueError, match="frozen"):
        rules.history_days = 1  # type: ignore[misc]
