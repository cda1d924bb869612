"""SPEC 3: a tenant's `promptCache` and `promptCacheTtl` rules, their defaults and refusals."""

import json
from typing import Any, get_args

import jsonschema
import pytest

from memory_core.rules import SCHEMA_FILE, InvalidRules, TenantRules, parse_rules
from memory_core.rules.model import PromptCache, PromptCacheTtl

RETENTION = 30


def _one_tenant(rules: dict[str, Any], tenant: str = "acme") -> dict[str, Any]:
    return {"tenants": {tenant: rules}}


def _tenant(rules: dict[str, Any]) -> TenantRules:
    return parse_rules(_one_tenant(rules), RETENTION).tenants["acme"]


def _refusal(document: Any) -> str:
    with pytest.raises(InvalidRules) as refused:
        parse_rules(document, RETENTION)
    return str(refused.value)


def test_a_tenant_caches_sliding_for_5_minutes_by_default():
    rules = _tenant({})
    assert (rules.prompt_cache, rules.prompt_cache_ttl) == ("sliding", "5m")


@pytest.mark.parametrize("policy", ["off", "sliding", "stable"])
@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_every_policy_and_ttl_is_read(policy, ttl):
    rules = _tenant({"promptCache": policy, "promptCacheTtl": ttl})
    assert (rules.prompt_cache, rules.prompt_cache_ttl) == (policy, ttl)
    assert rules == TenantRules(promptCache=policy, promptCacheTtl=ttl)


BAD_POLICIES = ["on", "Off", "SLIDING", "none", "", "5m", True, False, None, 0, ["off"], {}]
BAD_TTLS = ["5", "5min", "60m", "1H", "300", "", 300, 5, True, None, ["1h"]]


@pytest.mark.parametrize("value", BAD_POLICIES, ids=repr)
def test_a_prompt_cache_that_is_not_a_policy_is_refused_by_tenant_and_field(value):
    message = _refusal(_one_tenant({"promptCache": value}, tenant="campus-advisers"))
    assert "tenant 'campus-advisers', field promptCache: " in message
    assert "must be 'off', 'sliding' or 'stable'" in message
    assert f"(got {value!r})" in message


@pytest.mark.parametrize("value", BAD_TTLS, ids=repr)
def test_a_prompt_cache_ttl_that_is_not_a_ttl_is_refused_by_tenant_and_field(value):
    message = _refusal(_one_tenant({"promptCacheTtl": value}, tenant="acme-legal"))
    assert "tenant 'acme-legal', field promptCacheTtl: " in message
    assert "must be '5m' or '1h'" in message
    assert f"(got {value!r})" in message


@pytest.mark.parametrize("field", ["promptcache", "prompt_cache", "promptCacheTTL", "cacheTtl"])
def test_a_misspelt_cache_field_is_refused_rather_than_becoming_the_default(field):
    message = _refusal(_one_tenant({field: "off"}))
    assert f"tenant 'acme', field {field}: unknown field" in message


def test_the_schema_lists_the_models_own_choices():
    tenant = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))["definitions"]["tenant"]
    properties = tenant["properties"]
    assert properties["promptCache"] == {
        "description": properties["promptCache"]["description"],
        "type": "string",
        "enum": list(get_args(PromptCache)),
    }
    assert properties["promptCacheTtl"] == {
        "description": properties["promptCacheTtl"]["description"],
        "type": "string",
        "enum": list(get_args(PromptCacheTtl)),
    }


@pytest.mark.parametrize(
    ("rules", "valid"),
    [
        ({"promptCache": "off"}, True),
        ({"promptCache": "stable", "promptCacheTtl": "1h"}, True),
        ({"promptCacheTtl": "5m"}, True),
        ({"promptCache": "on"}, False),
        ({"promptCache": None}, False),
        ({"promptCacheTtl": 300}, False),
        ({"promptCacheTtl": "1H"}, False),
    ],
    ids=repr,
)
def test_the_schema_and_the_model_agree_on_the_cache_rules(rules, valid):
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    document = _one_tenant(rules)
    schema_accepts = jsonschema.Draft4Validator(schema).is_valid(document)
    try:
        parse_rules(document, RETENTION)
        model_accepts = True
    except InvalidRules:
        model_accepts = False
    assert (schema_accepts, model_accepts) == (valid, valid)
