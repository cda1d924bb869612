"""SPEC 8: the tenant a call acts on comes from the authenticated caller, never the path alone."""

from __future__ import annotations

import pytest

from memory_core.rules import TenantRules
from memory_core.tenancy import caller_may_act_for, role_of_session

ACCOUNT = "123456789012"
OTHER_ACCOUNT = "210987654321"
AGENT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/AgentRole"
PATH_ROLE = f"arn:aws:iam::{ACCOUNT}:role/service/agents/PathRole"
USER = f"arn:aws:iam::{ACCOUNT}:user/alice"
PINNED_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/Pinned/one-session"

ACME = TenantRules(callers=[AGENT_ROLE, PATH_ROLE, USER, PINNED_SESSION])
GOV = TenantRules(callers=[f"arn:aws-us-gov:iam::{ACCOUNT}:role/AgentRole"])
CHINA = TenantRules(callers=[f"arn:aws-cn:iam::{ACCOUNT}:role/service/AgentRole"])
NO_CALLERS = TenantRules()


def _session(role: str, *, account: str = ACCOUNT, partition: str = "aws") -> str:
    return f"arn:{partition}:sts::{account}:assumed-role/{role}/session-42"


@pytest.mark.parametrize(
    ("rules", "caller", "allowed"),
    [
        # Listed principals, matched exactly.
        (ACME, AGENT_ROLE, True),
        (ACME, USER, True),
        (ACME, PATH_ROLE, True),
        (ACME, PINNED_SESSION, True),
        # A session of a listed role, whatever the session name.
        (ACME, _session("AgentRole"), True),
        (ACME, f"arn:aws:sts::{ACCOUNT}:assumed-role/AgentRole/i-0abc@example.com", True),
        # Session ARNs drop the role's path: account + name match the listed path role.
        (ACME, _session("PathRole"), True),
        # A listed session ARN admits that session only, not the role's other sessions.
        (ACME, f"arn:aws:sts::{ACCOUNT}:assumed-role/Pinned/another-session", False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:role/Pinned", False),
        # The same role name in another account is another role.
        (ACME, _session("AgentRole", account=OTHER_ACCOUNT), False),
        (ACME, f"arn:aws:iam::{OTHER_ACCOUNT}:role/AgentRole", False),
        # Nor does another partition match.
        (ACME, _session("AgentRole", partition="aws-cn"), False),
        (ACME, _session("AgentRole", partition="aws-us-gov"), False),
        (GOV, _session("AgentRole", partition="aws-us-gov"), True),
        (GOV, _session("AgentRole"), False),
        (CHINA, _session("AgentRole", partition="aws-cn"), True),
        (CHINA, _session("AgentRole", partition="aws-us-gov"), False),
        # Near-miss names: no prefixes, no case folding, no wildcards.
        (ACME, _session("AgentRoleX"), False),
        (ACME, _session("Agent"), False),
        (ACME, _session("agentrole"), False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:role/AgentRoleX", False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:role/other-path/AgentRole", False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:user/alice2", False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:user/ALICE", False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:role/*", False),
        (ACME, f"arn:aws:sts::{ACCOUNT}:assumed-role/*/session-42", False),
        # Other principal kinds are never read as a role session.
        (ACME, f"arn:aws:sts::{ACCOUNT}:federated-user/AgentRole", False),
        (ACME, f"arn:aws:iam::{ACCOUNT}:root", False),
        (ACME, "", False),
        # A tenant listing no callers admits nobody.
        (NO_CALLERS, AGENT_ROLE, False),
        (NO_CALLERS, _session("AgentRole"), False),
    ],
)
def test_who_may_act_for_a_tenant(rules, caller, allowed):
    assert caller_may_act_for(rules, caller, identity_required=True) is allowed


@pytest.mark.parametrize(
    ("rules", "identity_required", "allowed"),
    [
        (ACME, True, False),
        (NO_CALLERS, True, False),
        # The local runner without auth: there is no identity to check.
        (ACME, False, True),
        (NO_CALLERS, False, True),
    ],
)
def test_a_call_without_identity_is_allowed_only_where_none_is_required(
    rules, identity_required, allowed
):
    assert caller_may_act_for(rules, None, identity_required=identity_required) is allowed


@pytest.mark.parametrize(
    ("caller", "allowed"),
    [(AGENT_ROLE, True), (_session("AgentRole"), True), (_session("Stranger"), False)],
)
def test_an_identity_that_is_present_is_checked_even_where_none_is_required(caller, allowed):
    assert caller_may_act_for(ACME, caller, identity_required=False) is allowed


@pytest.mark.parametrize(
    ("arn", "role"),
    [
        (_session("AgentRole"), AGENT_ROLE),
        (_session("AgentRole", partition="aws-cn"), f"arn:aws-cn:iam::{ACCOUNT}:role/AgentRole"),
        (
            _session("AgentRole", partition="aws-us-gov", account=OTHER_ACCOUNT),
            f"arn:aws-us-gov:iam::{OTHER_ACCOUNT}:role/AgentRole",
        ),
        (
            f"arn:aws:sts::{ACCOUNT}:assumed-role/a.b+c=d,e@f_g-h/s",
            f"arn:aws:iam::{ACCOUNT}:role/a.b+c=d,e@f_g-h",
        ),
        # Not assumed-role sessions.
        (AGENT_ROLE, None),
        (USER, None),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/bob", None),
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/AgentRole", None),
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/AgentRole/", None),
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/path/AgentRole/session", None),
        (f"arn:aws-iso:sts::{ACCOUNT}:assumed-role/AgentRole/session", None),
        ("arn:aws:sts::12345678901:assumed-role/AgentRole/session", None),
        (f"{_session('AgentRole')}\n", None),
        ("", None),
    ],
)
def test_role_of_session(arn, role):
    assert role_of_session(arn) == role
