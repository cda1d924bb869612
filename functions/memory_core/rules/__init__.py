"""Tenant rules: the model, the refusals, and the schema's retention bound."""

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

__all__ = [
    "CALLER_ARN_PATTERN",
    "SCHEMA_FILE",
    "TENANT_ID_PATTERN",
    "InvalidRules",
    "RateLimit",
    "RulesDocument",
    "TenantRules",
    "parse_rules",
    "schema_with_retention",
]
