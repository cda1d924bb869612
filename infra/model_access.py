"""What the configured Bedrock model id names, and the IAM grant that lets a role invoke it.

`bedrockModelId` may name:

- a foundation model, `amazon.nova-lite-v1:0`: invoked in the stack's own Region;
- a cross-Region (system-defined) inference profile, `us.amazon.nova-lite-v1:0`: the
  geography prefix, then the foundation model it routes to;
- an ARN of a foundation model, of such a profile, or of an application inference profile
  (`arn:aws:bedrock:us-east-1:111122223333:application-inference-profile/a1b2c3d4e5f6`).

A profile needs `bedrock:InvokeModel` on the profile AND on the foundation model in every
Region it routes to. Those Regions vary by model and change over time, and a global profile
routes to a Region-less model ARN (`arn:aws:bedrock:::foundation-model/...`), so the model is
granted in Region `*` (which matches the empty Region too), as AWS documents, on condition
`bedrock:InferenceProfileArn` = the profile: the model is usable through that profile only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

INVOKE = "bedrock:InvokeModel"
# The prefixes of the system-defined profiles: the geographic ones, and global (any commercial
# Region). `ca` (Canada) is accepted too: ids with it are in use.
GEOGRAPHIES = ("us", "us-gov", "eu", "apac", "jp", "au", "ca", "global")
EXPECTED = (
    "a foundation model id (provider.model, e.g. amazon.nova-lite-v1:0), a cross-Region "
    f"inference profile id ({'|'.join(GEOGRAPHIES)} then a dot and a foundation model id, "
    "e.g. us.amazon.nova-lite-v1:0), or the ARN of a foundation model, inference profile "
    "or application inference profile"
)

# AWS's own pattern for the model id in a foundation-model ARN, less its extra dotted parts:
# no foundation model id has more than one dot, which tells `us.amazon.x` (a profile) apart.
_SEGMENT = r"[a-z0-9-]{1,63}"
_MODEL = rf"{_SEGMENT}\.{_SEGMENT}(?::{_SEGMENT}){{0,2}}"
_FOUNDATION_MODEL = re.compile(_MODEL)
_PROFILE = re.compile(rf"(?P<prefix>{_SEGMENT})\.(?P<model>{_MODEL})")
_ARN = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):bedrock:(?P<region>[a-z0-9-]*):(?P<account>[0-9]*):"
    r"(?P<kind>[a-z-]+)/(?P<id>.+)"
)
_REGION = re.compile(r"[a-z]{2,}(?:-[a-z]+)+-[0-9]+")
_ACCOUNT = re.compile(r"[0-9]{12}")
# AWS's pattern for an inference profile id (an application profile's is generated).
_PROFILE_ID = re.compile(r"[a-zA-Z0-9-:.]{1,64}")


class InvalidModelId(ValueError):
    """The model id is none of the forms Bedrock accepts; the message says what was expected."""

    def __init__(self, value: str, reason: str) -> None:
        super().__init__(f"bedrockModelId {value!r} {reason}; expected {EXPECTED}")


@dataclass(frozen=True)
class FoundationModel:
    model_id: str
    arn: str | None = None  # when configured as an ARN; otherwise in the stack's Region


@dataclass(frozen=True)
class InferenceProfile:
    """A cross-Region (system-defined) inference profile."""

    profile_id: str
    geography: str
    model_id: str  # the foundation model it routes to
    arn: str | None = None  # when configured as an ARN; otherwise in the stack's Region


@dataclass(frozen=True)
class ApplicationInferenceProfile:
    """A profile an account creates (for cost tracking): its model is unknown at synth."""

    arn: str
    partition: str
    region: str
    account: str


ModelTarget = FoundationModel | InferenceProfile | ApplicationInferenceProfile


def parse_model_id(value: str) -> ModelTarget:
    """What `value` names; `InvalidModelId` when it is none of the forms Bedrock accepts."""
    if value.startswith("arn:"):
        return _parse_arn(value)
    if _FOUNDATION_MODEL.fullmatch(value):
        return FoundationModel(value)
    return _system_profile(value, value)


def _system_profile(profile_id: str, value: str, arn: str | None = None) -> InferenceProfile:
    profile = _PROFILE.fullmatch(profile_id)
    if profile is None:
        raise InvalidModelId(value, "is not a model id, profile id or ARN")
    if profile["prefix"] not in GEOGRAPHIES:
        raise InvalidModelId(value, f"has an unknown geography prefix {profile['prefix']!r}")
    return InferenceProfile(profile_id, profile["prefix"], profile["model"], arn)


def _parse_arn(value: str) -> ModelTarget:
    arn = _ARN.fullmatch(value)
    if arn is None or not _REGION.fullmatch(arn["region"]):
        raise InvalidModelId(value, "is not a Bedrock ARN (arn:partition:bedrock:region:...)")
    kind, resource_id, account = arn["kind"], arn["id"], arn["account"]
    if kind == "foundation-model" and not account and _FOUNDATION_MODEL.fullmatch(resource_id):
        return FoundationModel(resource_id, arn=value)
    if not _ACCOUNT.fullmatch(account):
        raise InvalidModelId(value, f"is a malformed {kind} ARN")
    if kind == "inference-profile":
        return _system_profile(resource_id, value, arn=value)
    if kind == "application-inference-profile" and _PROFILE_ID.fullmatch(resource_id):
        return ApplicationInferenceProfile(value, arn["partition"], arn["region"], account)
    # Provisioned, custom and imported models have grants of their own: refused, not guessed.
    raise InvalidModelId(value, f"is a malformed or unsupported {kind} ARN")


@dataclass(frozen=True)
class ModelGrant:
    """`bedrock:InvokeModel` on what the model id names, and on the models a profile routes to.

    `resources` are the ARNs the caller names (the model, or the profile), granted as they
    are: they fit a Step Functions SDK task's `iam_resources`. `routed` are the statements
    for the foundation models behind a profile, usable only through it (empty for a model).
    `nag_findings` are cdk-nag's AwsSolutions-IAM5 findings on the grant (its `*` Regions),
    as cdk-nag names them, for the role's acknowledgments.
    """

    resources: tuple[str, ...]
    routed: tuple[iam.PolicyStatement, ...]
    nag_findings: tuple[str, ...]

    def statements(self) -> list[iam.PolicyStatement]:
        return [iam.PolicyStatement(actions=[INVOKE], resources=list(self.resources)), *self.routed]


def model_grant(scope: Construct, model_id: str) -> ModelGrant:
    """The grant to invoke `model_id` from `scope`'s stack (`InvalidModelId` if malformed)."""
    stack = Stack.of(scope)
    target = parse_model_id(model_id)
    if isinstance(target, FoundationModel):
        arn = target.arn or _foundation_model(stack, target.model_id, stack.region)
        return _grant(stack, (arn,), ())
    if isinstance(target, InferenceProfile):
        profile = target.arn or stack.format_arn(
            service="bedrock",
            resource="inference-profile",
            resource_name=target.profile_id,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        model = _foundation_model(stack, target.model_id, "*", partition=_partition(target.arn))
        return _grant(stack, (profile,), (_only_through(profile, [model]),))
    # The profile's model is known to Bedrock only: any model, but only through this profile.
    # It may copy a system-defined profile, which Bedrock authorizes too; that alone reaches
    # no model, since models are granted through this profile only.
    models = f"arn:{target.partition}:bedrock:*::foundation-model/*"
    system_profiles = (
        f"arn:{target.partition}:bedrock:{target.region}:{target.account}:inference-profile/*"
    )
    return _grant(stack, (target.arn, system_profiles), (_only_through(target.arn, [models]),))


def _foundation_model(
    stack: Stack, model_id: str, region: str, partition: str | None = None
) -> str:
    return f"arn:{partition or stack.partition}:bedrock:{region}::foundation-model/{model_id}"


def _partition(arn: str | None) -> str | None:
    return arn.split(":")[1] if arn else None


def _only_through(profile: str, models: list[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        actions=[INVOKE],
        resources=models,
        conditions={"StringEquals": {"bedrock:InferenceProfileArn": profile}},
    )


def _grant(
    stack: Stack, resources: tuple[str, ...], routed: tuple[iam.PolicyStatement, ...]
) -> ModelGrant:
    named = [*resources, *(r for s in routed for r in s.resources)]
    findings = tuple(
        f"AwsSolutions-IAM5[Resource::{shown}]"
        for shown in (_as_cdk_nag_shows(stack.resolve(r)) for r in named)
        if "*" in shown
    )
    return ModelGrant(resources, routed, findings)


def _as_cdk_nag_shows(resolved: Any) -> str:
    """A resolved ARN as cdk-nag prints it: a reference `{"Ref": X}` as `<X>`."""
    if isinstance(resolved, str):
        return resolved
    if "Fn::Join" in resolved:
        separator, parts = resolved["Fn::Join"]
        return str(separator).join(_as_cdk_nag_shows(part) for part in parts)
    if "Ref" in resolved:
        return f"<{resolved['Ref']}>"
    raise ValueError(f"no cdk-nag name for {resolved!r}")
