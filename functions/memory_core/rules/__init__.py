"""Tenant rules: the model, the refusals, the schema's retention bound, the strict JSON reading."""

from memory_core.rules.model import (
    CALLER_ARN_PATTERN,
    TENANT_ID_PATTERN,
    InvalidRules,
    RateLimit,
    RulesDocument,
    TenantRules,
    parse_rules,
)
from memory_core.rules.schema import SCHEMA_FILE, schema_with_retention
from memory_core.rules.text import UnreadableRules, load_rules_json

__all__ = [
    "CALLER_ARN_PATTERN",
    "SCHEMA_FILE",
    "TENANT_ID_PATTERN",
    "InvalidRules",
    "RateLimit",
    "RulesDocument",
    "TenantRules",
    "UnreadableRules",
    "load_rules_json",
    "parse_rules",
    "schema_with_retention",
]
