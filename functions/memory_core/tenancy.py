"""Whether an authenticated caller may act for a tenant (SPEC 8).

Through API Gateway the tenant a call acts on comes from the authenticated
caller, never from the path alone: a caller of tenant A asking for tenant B is
refused. The rules list, per tenant, the IAM principal ARNs allowed to act for
it (`callers`).

An agent running under an IAM role reaches the API as an STS session,
`arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`. Its session name changes
with every session and the ARN drops the role's path, so operators list the
role, and a session matches a listed role of the same partition, account and
name. Role names are unique within an account whatever their path, so the
path can be ignored without admitting another role. Everything else is an
exact match, with no wildcards: one listing admits exactly one principal.
"""

from __future__ import annotations

import re

from memory_core.rules import TenantRules

# IAM's character set for role and session names.
_NAME = r"[A-Za-z0-9+=,.@_-]+"
_PARTITION = r"aws|aws-cn|aws-us-gov"
_SESSION_ARN = re.compile(
    rf"arn:(?P<partition>{_PARTITION}):sts::(?P<account>[0-9]{{12}}):"
    rf"assumed-role/(?P<role>{_NAME})/{_NAME}"
)
_ROLE_ARN = re.compile(
    rf"arn:(?P<partition>{_PARTITION}):iam::(?P<account>[0-9]{{12}}):"
    rf"role/(?:{_NAME}/)*(?P<role>{_NAME})"
)


def role_of_session(arn: str) -> str | None:
    """The role ARN (without a path) an assumed-role session ARN belongs to, else None."""
    session = _SESSION_ARN.fullmatch(arn)
    if session is None:
        return None
    return _role_arn(session)


def caller_may_act_for(
    tenant_rules: TenantRules, caller_arn: str | None, *, identity_required: bool
) -> bool:
    """True when `caller_arn` is one of the tenant's callers, or a session of one of its roles.

    `caller_arn` is None when the request carries no authenticated identity;
    that is allowed only where identity is not required (the local runner
    without auth). A caller that is present is always checked.
    """
    if caller_arn is None:
        return not identity_required
    if caller_arn in tenant_rules.callers:
        return True
    session_role = role_of_session(caller_arn)
    if session_role is None:
        return False
    return any(_role_without_path(listed) == session_role for listed in tenant_rules.callers)


def _role_without_path(arn: str) -> str | None:
    role = _ROLE_ARN.fullmatch(arn)
    return None if role is None else _role_arn(role)


def _role_arn(match: re.Match[str]) -> str:
    return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
