"""Who may act for a tenant (SPEC 8): every route resolves the tenant's rules through here."""

from __future__ import annotations

from dataclasses import dataclass

from adapters.rules_source import RulesSource
from converse_history.errors import forbidden, unknown_tenant
from memory_core.rules import TenantRules
from memory_core.tenancy import caller_may_act_for


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: an IAM principal through API Gateway, or nobody known."""

    arn: str | None
    identity_required: bool


def tenant_for(rules: RulesSource, tenant_id: str, caller: Caller) -> TenantRules:
    """The tenant's rules; 404 for a tenant the rules do not have, 403 for another's caller."""
    tenant = rules.current().for_tenant(tenant_id)
    if tenant is None:
        raise unknown_tenant(tenant_id)
    if not caller_may_act_for(tenant, caller.arn, identity_required=caller.identity_required):
        raise forbidden(tenant_id)
    return tenant
