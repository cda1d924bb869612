"""SPEC 3: the shipped JSON Schema (what AppConfig validates) and the code's model agree."""

import json
import string
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.rules import (
    CALLER_ARN_PATTERN,
    SCHEMA_FILE,
    TENANT_ID_PATTERN,
    InvalidRules,
    parse_rules,
    schema_with_retention,
)

RULES_EXAMPLE = Path(__file__).resolve().parents[2] / "rules.example.json"
AGENT = "arn:aws:iam::123456789012:role/agent"


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


def _validator(retention: int) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(schema_with_retention(_schema(), retention))


VALIDATORS = {30: _validator(30), 7: _validator(7)}


def _schema_accepts(document: Any, retention: int) -> bool:
    return VALIDATORS[retention].is_valid(document)


def _model_accepts(document: Any, retention: int) -> bool:
    try:
        parse_rules(document, retention)
    except InvalidRules:
        return False
    return True


def test_the_schema_is_a_valid_draft_04_schema():
    schema = _schema()
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    jsonschema.Draft4Validator.check_schema(schema)
    jsonschema.Draft4Validator.check_schema(schema_with_retention(schema, 30))


def test_the_retention_bound_lands_on_history_days_only():
    schema = _schema()
    bound = schema_with_retention(schema, 45)
    history_days = bound["definitions"]["tenant"]["properties"]["historyDays"]
    assert history_days["maximum"] == 45
    assert history_days["minimum"] == 1
    assert "maximum" not in schema["definitions"]["tenant"]["properties"]["historyDays"]
    bound["definitions"]["tenant"]["properties"]["historyDays"].pop("maximum")
    assert bound == schema


def test_a_retention_below_the_default_makes_history_days_required():
    bound = schema_with_retention(_schema(), 7)
    assert bound["definitions"]["tenant"]["required"] == ["historyDays"]
    assert "required" not in schema_with_retention(_schema(), 30)["definitions"]["tenant"]


def test_the_schema_and_the_model_share_their_patterns():
    schema = _schema()
    assert list(schema["properties"]["tenants"]["patternProperties"]) == [TENANT_ID_PATTERN]
    callers = schema["definitions"]["tenant"]["properties"]["callers"]
    assert callers["items"]["pattern"] == CALLER_ARN_PATTERN


def _tenant(rules: Any, tenant: str = "acme") -> dict[str, Any]:
    return {"tenants": {tenant: rules}}


def case(name: str, document: Any, valid: bool, marks: Any = ()) -> Any:
    return pytest.param(document, valid, id=name, marks=marks)


AGREEMENT_TABLE = [
    case("example file", json.loads(RULES_EXAMPLE.read_text(encoding="utf-8")), True),
    case("empty tenant", _tenant({}), True),
    case("no tenants", {"tenants": {}}, True),
    case(
        "every field",
        _tenant(
            {
                "historyDays": 30,
                "idleResetHours": 1,
                "maxTurnsPerConversation": 10**9,
                "rateLimit": {"messages": 20, "perSeconds": 60},
                "callers": [AGENT, "arn:aws-cn:sts::123456789012:assumed-role/a/b"],
                "promptCache": "stable",
                "promptCacheTtl": "1h",
            }
        ),
        True,
    ),
    case("tenant id of 64", {"tenants": {"a" * 64: {}}}, True),
    case("history days at retention", _tenant({"historyDays": 30}), True),
    case("history days above retention", _tenant({"historyDays": 31}), False),
    case("history days zero", _tenant({"historyDays": 0}), False),
    case("idle reset negative", _tenant({"idleResetHours": -1}), False),
    case("max turns fraction", _tenant({"maxTurnsPerConversation": 1.5}), False),
    case("max turns integral float", _tenant({"maxTurnsPerConversation": 25.0}), False),
    case("history days string", _tenant({"historyDays": "30"}), False),
    case("idle reset boolean", _tenant({"idleResetHours": True}), False),
    case("history days null", _tenant({"historyDays": None}), False),
    case(
        "rate limit messages zero", _tenant({"rateLimit": {"messages": 0, "perSeconds": 60}}), False
    ),
    case(
        "rate limit per seconds fraction",
        _tenant({"rateLimit": {"messages": 5, "perSeconds": 0.5}}),
        False,
    ),
    case("rate limit partial", _tenant({"rateLimit": {"messages": 5}}), False),
    case("rate limit empty", _tenant({"rateLimit": {}}), False),
    case(
        "rate limit unknown field",
        _tenant({"rateLimit": {"messages": 5, "perSeconds": 60, "burst": 2}}),
        False,
    ),
    case("rate limit not an object", _tenant({"rateLimit": 5}), False),
    case("rate limit null", _tenant({"rateLimit": None}), False),
    case("callers not a list", _tenant({"callers": AGENT}), False),
    case("callers null", _tenant({"callers": None}), False),
    case("callers bad arn", _tenant({"callers": [AGENT, "arn:aws:s3:::bucket"]}), False),
    case("callers not strings", _tenant({"callers": [12]}), False),
    case("prompt cache off", _tenant({"promptCache": "off"}), True),
    case("prompt cache unknown", _tenant({"promptCache": "on"}), False),
    case("prompt cache null", _tenant({"promptCache": None}), False),
    case("prompt cache ttl unknown", _tenant({"promptCacheTtl": "10m"}), False),
    case("prompt cache ttl number", _tenant({"promptCacheTtl": 300}), False),
    case("unknown tenant field", _tenant({"historydays": 30}), False),
    case("python field name", _tenant({"history_days": 30}), False),
    case("unknown top-level field", {"tenants": {}, "version": 1}, False),
    case("bad tenant id", {"tenants": {"acme legal": {}}}, False),
    case("tenant id of 65", {"tenants": {"a" * 65: {}}}, False),
    case("tenant id starting with a dash", {"tenants": {"-acme": {}}}, False),
    case("missing tenants", {}, False),
    case("tenants not an object", {"tenants": ["acme"]}, False),
    case("tenant entry not an object", _tenant(None), False),
    case("document not an object", [], False),
]


@pytest.mark.parametrize(("document", "valid"), AGREEMENT_TABLE)
def test_the_schema_and_the_model_give_the_expected_verdict(document, valid):
    assert (_schema_accepts(document, 30), _model_accepts(document, 30)) == (valid, valid)


@pytest.mark.parametrize(
    ("document", "valid"),
    [
        (_tenant({"historyDays": 7}), True),
        (_tenant({"historyDays": 8}), False),
        (_tenant({"historyDays": 30}), False),
        (_tenant({"historyDays": 7, "idleResetHours": 720}), True),
        (_tenant({"idleResetHours": 5}), False),
    ],
    ids=[
        "at retention",
        "one above",
        "the default written out",
        "other fields unbound",
        "the default left implicit",
    ],
)
def test_the_schema_and_the_model_agree_at_a_retention_of_7(document, valid):
    assert (_schema_accepts(document, 7), _model_accepts(document, 7)) == (valid, valid)


# -- generated documents ---------------------------------------------------------------------

# No newlines: Python's `re` (which the jsonschema library uses) lets `$` match before a
# trailing newline, while pydantic's regex does not. That is a quirk of the library used in
# this test, not of AppConfig's validator, so it is kept out of the comparison.
NO_NEWLINE_ASCII = "".join(ch for ch in string.printable if ch not in "\n\r\x0b\x0c")

VALID_ARNS = [
    AGENT,
    "arn:aws:sts::123456789012:assumed-role/broker/session-1",
    "arn:aws-us-gov:iam::000000000000:user/ops@example.com",
]
ARN_LIKE = [
    "arn:aws:iam::12345678901:role/agent",
    "arn:aws:s3:::bucket",
    "arn:aws:iam::123456789012:",
    "arn:aws:iam::123456789012:role/agent x",
    "ARN:aws:iam::123456789012:role/agent",
]

no_newline_text = st.text(alphabet=NO_NEWLINE_ASCII, max_size=12)


def mostly(
    valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """`valid` nine times in ten: a document is then often valid, or wrong in few places.

    (Repeating a branch in `st.one_of` would not weigh it: nested `one_of`s are flattened.)
    """
    return st.integers(min_value=0, max_value=9).flatmap(lambda pick: valid if pick else invalid)


# historyDays 1..7 is valid at both retentions under test; 8..40 crosses 7 and then 30.
days = mostly(st.integers(min_value=1, max_value=7), st.integers(min_value=8, max_value=40))
positive = mostly(
    st.integers(min_value=1, max_value=100), st.integers(min_value=101, max_value=2**70)
)
edge_values = st.sampled_from([0, -1, 1.5, 30.0, 7.0, 0.0, "30", "1", "", True, False, None])
not_positive = st.one_of(
    edge_values,
    st.integers(min_value=-(2**70), max_value=0),
    st.floats(allow_nan=False),
    no_newline_text,
    st.lists(positive, max_size=2),
    st.dictionaries(no_newline_text, positive, max_size=2),
)
not_an_object = not_positive.filter(lambda value: not isinstance(value, dict))
unknown_keys = st.one_of(
    st.sampled_from(
        ["historydays", "history_days", "burst", "per_seconds", "$schema", "callers ", "Tenants"]
    ),
    no_newline_text,
)
valid_arns = st.one_of(
    st.sampled_from(VALID_ARNS),
    st.from_regex(CALLER_ARN_PATTERN, fullmatch=True).filter(lambda arn: "\n" not in arn),
)
not_arns = st.one_of(st.sampled_from(ARN_LIKE), no_newline_text, positive, st.none())

# Mixed: every value is drawn valid or invalid on its own.
rate_limits = mostly(
    st.fixed_dictionaries(
        {"messages": mostly(positive, not_positive), "perSeconds": mostly(positive, not_positive)}
    ),
    st.one_of(
        st.fixed_dictionaries({}, optional={"messages": positive, "perSeconds": positive}),
        st.fixed_dictionaries(
            {"messages": positive, "perSeconds": positive}, optional={"burst": positive}
        ),
        not_an_object,
    ),
)
callers = mostly(
    st.lists(mostly(valid_arns, not_arns), max_size=3),
    not_positive.filter(lambda value: not isinstance(value, list)),
)
policies = st.sampled_from(["off", "sliding", "stable"])
ttls = st.sampled_from(["5m", "1h"])
not_a_choice = st.one_of(
    st.sampled_from(["on", "Off", "5", "1H", "none", "", "stable ", 5, True]), edge_values
)
tenant_rules = st.fixed_dictionaries(
    {},
    optional={
        "historyDays": mostly(days, not_positive),
        "idleResetHours": mostly(positive, not_positive),
        "maxTurnsPerConversation": mostly(positive, not_positive),
        "rateLimit": rate_limits,
        "callers": callers,
        "promptCache": mostly(policies, not_a_choice),
        "promptCacheTtl": mostly(ttls, not_a_choice),
    },
)

# One fault: a valid tenant with exactly one thing wrong, or nothing.
valid_tenant_rules = st.fixed_dictionaries(
    {},
    optional={
        "historyDays": days,
        "idleResetHours": positive,
        "maxTurnsPerConversation": positive,
        "rateLimit": st.fixed_dictionaries({"messages": positive, "perSeconds": positive}),
        "callers": st.lists(valid_arns, max_size=3),
        "promptCache": policies,
        "promptCacheTtl": ttls,
    },
)
SCALAR_FIELDS = ["historyDays", "idleResetHours", "maxTurnsPerConversation"]
FAULTS = [
    "none",
    "scalar",
    "rate limit",
    "rate limit value",
    "rate limit missing",
    "rate limit unknown",
    "callers",
    "caller",
    "cache",
    "unknown",
]


@st.composite
def one_fault_tenant_rules(draw: st.DrawFn) -> dict[str, Any]:
    rules: dict[str, Any] = draw(valid_tenant_rules)
    limit = dict(rules.get("rateLimit") or {"messages": draw(positive), "perSeconds": 60})
    fault = draw(st.sampled_from(FAULTS))
    if fault == "scalar":
        rules[draw(st.sampled_from(SCALAR_FIELDS))] = draw(not_positive)
    elif fault == "rate limit":
        rules["rateLimit"] = draw(not_an_object)
    elif fault == "rate limit value":
        limit[draw(st.sampled_from(["messages", "perSeconds"]))] = draw(not_positive)
        rules["rateLimit"] = limit
    elif fault == "rate limit missing":
        del limit[draw(st.sampled_from(["messages", "perSeconds"]))]
        rules["rateLimit"] = limit
    elif fault == "rate limit unknown":
        rules["rateLimit"] = {**limit, draw(unknown_keys): draw(positive)}
    elif fault == "callers":
        rules["callers"] = draw(not_positive.filter(lambda value: not isinstance(value, list)))
    elif fault == "caller":
        arns = list(rules.get("callers", []))
        arns.insert(draw(st.integers(0, len(arns))), draw(not_arns))
        rules["callers"] = arns
    elif fault == "cache":
        rules[draw(st.sampled_from(["promptCache", "promptCacheTtl"]))] = draw(not_a_choice)
    elif fault == "unknown":
        rules = {draw(unknown_keys): draw(positive), **rules}
    return rules


def _with_unknown(known: dict[str, Any], unknown: dict[str, Any]) -> dict[str, Any]:
    return {**unknown, **known}


tenant_entries = mostly(
    st.one_of(tenant_rules, one_fault_tenant_rules()),
    st.one_of(
        st.builds(_with_unknown, tenant_rules, st.dictionaries(unknown_keys, positive, min_size=1)),
        not_positive,
    ),
)
valid_tenant_ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", fullmatch=True)
bad_tenant_ids = st.one_of(
    st.sampled_from(["a" * 65, "-acme", "_x", "acme legal", "acme.x", "acme:x", "é", ""]),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{64,70}", fullmatch=True),  # too long
    st.from_regex(r"[^A-Za-z0-9\n][A-Za-z0-9_-]{0,10}", fullmatch=True),  # bad first character
    st.from_regex(r"[A-Za-z0-9]{1,5}[^A-Za-z0-9_\n-][A-Za-z0-9]{0,5}", fullmatch=True),
    st.text(alphabet=NO_NEWLINE_ASCII, max_size=70),
)
tenant_ids = mostly(valid_tenant_ids, bad_tenant_ids)
tenants = mostly(st.dictionaries(tenant_ids, tenant_entries, max_size=3), not_positive)
mixed_documents = mostly(
    st.fixed_dictionaries({"tenants": tenants}),
    st.one_of(
        st.fixed_dictionaries({}, optional={"version": positive}),
        st.builds(
            _with_unknown,
            st.fixed_dictionaries({"tenants": tenants}),
            st.dictionaries(
                unknown_keys.filter(lambda key: key != "tenants"), positive, min_size=1
            ),
        ),
        not_positive,
        st.lists(tenants, max_size=2),
    ),
)
DOCUMENT_FAULTS = ["none", "tenant", "tenant id", "unknown", "no tenants", "tenants", "document"]


@st.composite
def one_fault_documents(draw: st.DrawFn) -> Any:
    tenants = draw(st.dictionaries(valid_tenant_ids, valid_tenant_rules, max_size=3))
    fault = draw(st.sampled_from(DOCUMENT_FAULTS))
    if fault == "tenant":
        tenants[draw(valid_tenant_ids)] = draw(one_fault_tenant_rules())
    elif fault == "tenant id":
        tenants[draw(bad_tenant_ids)] = draw(valid_tenant_rules)
    elif fault == "unknown":
        return {"tenants": tenants, draw(unknown_keys.filter(lambda key: key != "tenants")): 1}
    elif fault == "no tenants":
        return {}
    elif fault == "tenants":
        return {"tenants": draw(not_positive)}
    elif fault == "document":
        return draw(st.one_of(not_positive, st.just([{"tenants": tenants}])))
    return {"tenants": tenants}


documents = st.one_of(mixed_documents, one_fault_documents())


@pytest.mark.parametrize("retention", [30, 7])
@settings(max_examples=300, deadline=None)
@given(document=documents)
def test_the_schema_and_the_model_agree_on_generated_documents(retention, document):
    assert _schema_accepts(document, retention) == _model_accepts(document, retention)


@pytest.mark.parametrize("retention", [30, 7])
@settings(max_examples=300, deadline=None)
@given(rules=st.one_of(tenant_rules, one_fault_tenant_rules()))
def test_the_schema_and_the_model_agree_on_generated_tenants(retention, rules):
    # The envelope is fixed, so the tenant's own values decide the verdict.
    document = {"tenants": {"acme": rules}}
    assert _schema_accepts(document, retention) == _model_accepts(document, retention)
