"""The configured Bedrock model id: what it names, the grant to invoke it, and its validation."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack, Validations

from infra.config import load_config
from infra.model_access import (
    ApplicationInferenceProfile,
    FoundationModel,
    InferenceProfile,
    InvalidModelId,
    ModelGrant,
    model_grant,
    parse_model_id,
)
from tests.infra.conftest import flatten, of_type, synthesise

ACCOUNT, REGION = "111122223333", "eu-west-1"
APPLICATION_PROFILE = (
    f"arn:aws:bedrock:{REGION}:{ACCOUNT}:application-inference-profile/a1b2c3d4e5f6"
)
MODELS = [
    "anthropic.claude-3-5-haiku-20241022-v1:0",
    "amazon.nova-lite-v1:0",
    "meta.llama3-1-8b-instruct-v1:0",
    "cohere.command-r-plus-v1:0",
    "mistral.mistral-large-2407-v1:0",
    "ai21.jamba-1-5-mini-v1:0",
    "amazon.titan-text-express-v1",
]


def shown(stack: Stack, value: Any) -> Any:
    """A value as the template holds it, references written `${Name}`."""
    resolved = stack.resolve(value)

    def text(node: Any) -> Any:
        if isinstance(node, list):
            return [text(n) for n in node]
        if isinstance(node, dict) and "Fn::Join" in node:
            separator, parts = node["Fn::Join"]
            return str(separator).join(text(p) for p in parts)
        if isinstance(node, dict) and set(node) == {"Ref"}:
            return "${" + node["Ref"] + "}"
        if isinstance(node, dict):
            return {k: text(v) for k, v in node.items()}
        return node

    return text(resolved)


def granted(model_id: str) -> tuple[Stack, ModelGrant, list[dict[str, Any]]]:
    stack = Stack(App(), "Test", env=Environment(account=ACCOUNT, region=REGION))
    grant = model_grant(stack, model_id)
    statements = [shown(stack, s.to_statement_json()) for s in grant.statements()]
    return stack, grant, statements


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# -- what the id names -------------------------------------------------------------------


@pytest.mark.parametrize("model_id", MODELS)
def test_a_provider_and_model_name_is_a_foundation_model(model_id):
    assert parse_model_id(model_id) == FoundationModel(model_id)


@pytest.mark.parametrize(
    ("geography", "model_id"),
    [
        ("us", "amazon.nova-lite-v1:0"),
        ("us", "anthropic.claude-sonnet-4-20250514-v1:0"),
        ("eu", "anthropic.claude-3-7-sonnet-20250219-v1:0"),
        ("apac", "amazon.nova-pro-v1:0"),
        ("us-gov", "anthropic.claude-3-haiku-20240307-v1:0"),
        ("jp", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("au", "anthropic.claude-haiku-4-5-20251001-v1:0"),
        ("global", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ],
)
def test_a_geography_prefix_makes_a_cross_region_profile_of_the_model(geography, model_id):
    profile_id = f"{geography}.{model_id}"
    assert parse_model_id(profile_id) == InferenceProfile(profile_id, geography, model_id)


def test_arns_name_a_model_a_profile_or_an_application_profile():
    model = f"arn:aws:bedrock:{REGION}::foundation-model/amazon.nova-lite-v1:0"
    profile = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/eu.amazon.nova-lite-v1:0"
    assert parse_model_id(model) == FoundationModel("amazon.nova-lite-v1:0", arn=model)
    assert parse_model_id(profile) == InferenceProfile(
        "eu.amazon.nova-lite-v1:0", "eu", "amazon.nova-lite-v1:0", arn=profile
    )
    assert parse_model_id(APPLICATION_PROFILE) == ApplicationInferenceProfile(
        APPLICATION_PROFILE, partition="aws", region=REGION, account=ACCOUNT
    )


# -- the grant ---------------------------------------------------------------------------


def test_a_foundation_model_is_granted_in_the_stacks_region_only():
    _, grant, statements = granted("amazon.nova-lite-v1:0")
    assert statements == [
        {
            "Action": "bedrock:InvokeModel",
            "Effect": "Allow",
            "Resource": (
                f"arn:${{AWS::Partition}}:bedrock:{REGION}::foundation-model/amazon.nova-lite-v1:0"
            ),
        }
    ]
    assert grant.nag_findings == ()


@pytest.mark.parametrize(
    ("geography", "model_id"),
    [
        ("us", "amazon.nova-lite-v1:0"),
        ("eu", "amazon.nova-lite-v1:0"),
        ("apac", "amazon.nova-micro-v1:0"),
        # A global profile routes to the Region-less model ARN, which Region * matches too.
        ("global", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ],
)
def test_a_profile_and_its_model_in_every_region_are_granted_the_model_only_through_it(
    geography, model_id
):
    profile_id = f"{geography}.{model_id}"
    stack, grant, statements = granted(profile_id)
    profile = f"arn:${{AWS::Partition}}:bedrock:{REGION}:{ACCOUNT}:inference-profile/{profile_id}"
    model = f"arn:${{AWS::Partition}}:bedrock:*::foundation-model/{model_id}"
    assert statements == [
        {"Action": "bedrock:InvokeModel", "Effect": "Allow", "Resource": profile},
        {
            "Action": "bedrock:InvokeModel",
            "Effect": "Allow",
            "Resource": model,
            "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": profile}},
        },
    ]
    # What the Step Functions task names, and cdk-nag's name for the wildcard Region.
    assert [shown(stack, r) for r in grant.resources] == [profile]
    assert grant.nag_findings == (
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/{model_id}]",
    )


def test_an_application_profile_reaches_any_model_but_only_through_itself():
    _, grant, statements = granted(APPLICATION_PROFILE)
    system_profiles = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/*"
    assert statements == [
        {
            "Action": "bedrock:InvokeModel",
            "Effect": "Allow",
            "Resource": [APPLICATION_PROFILE, system_profiles],
        },
        {
            "Action": "bedrock:InvokeModel",
            "Effect": "Allow",
            "Resource": "arn:aws:bedrock:*::foundation-model/*",
            "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": APPLICATION_PROFILE}},
        },
    ]
    assert set(grant.nag_findings) == {
        f"AwsSolutions-IAM5[Resource::{system_profiles}]",
        "AwsSolutions-IAM5[Resource::arn:aws:bedrock:*::foundation-model/*]",
    }


def test_an_arn_is_granted_as_written_in_its_own_partition():
    model = "arn:aws-us-gov:bedrock:us-gov-west-1::foundation-model/amazon.nova-lite-v1:0"
    profile = (
        f"arn:aws-us-gov:bedrock:us-gov-west-1:{ACCOUNT}:"
        "inference-profile/us-gov.amazon.nova-lite-v1:0"
    )
    assert granted(model)[2] == [
        {"Action": "bedrock:InvokeModel", "Effect": "Allow", "Resource": model}
    ]
    _, _, statements = granted(profile)
    assert [s["Resource"] for s in statements] == [
        profile,
        "arn:aws-us-gov:bedrock:*::foundation-model/amazon.nova-lite-v1:0",
    ]
    assert statements[1]["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": profile}}


# -- validation at synth -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "reason"),
    [
        ("", "is not a model id"),
        ("amazon nova lite", "is not a model id"),
        (" amazon.nova-lite-v1:0", "is not a model id"),
        ("amazon.nova-lite-v1:0\n", "is not a model id"),
        ("nova-lite-v1:0", "is not a model id"),
        ("Amazon.Nova-Lite-v1:0", "is not a model id"),
        ("xx.amazon.nova-lite-v1:0", "unknown geography prefix 'xx'"),
        ("usa.anthropic.claude-sonnet-4-20250514-v1:0", "unknown geography prefix 'usa'"),
        ("arn:aws:bedrock:us-east-1:12345:application-inference-profile/a1b2", "malformed"),
        (f"arn:aws:bedrock::{ACCOUNT}:application-inference-profile/a1b2", "not a Bedrock ARN"),
        (f"arn:aws:bedrock:{REGION}:{ACCOUNT}:application-inference-profile/", "not a Bedrock ARN"),
        ("arn:aws:s3:::my-bucket", "not a Bedrock ARN"),
        (f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/amazon.nova-lite-v1:0", "is not"),
        (f"arn:aws:bedrock:{REGION}:{ACCOUNT}:provisioned-model/a1b2c3", "unsupported"),
    ],
)
def test_an_implausible_model_id_fails_the_synth_naming_the_setting_value_and_forms(
    model_id, reason
):
    with pytest.raises(InvalidModelId) as refused:
        load_config(App(context={"bedrockModelId": model_id}).node, {})
    message = str(refused.value)
    assert message.startswith(f"bedrockModelId {model_id!r} ")
    assert reason in message
    assert "expected a foundation model id" in message
    assert "us|us-gov|eu|apac|jp|au|ca|global" in message


def test_a_model_id_from_the_environment_is_validated_too():
    with pytest.raises(ValueError, match="bedrockModelId 'amazon nova'"):
        load_config(App().node, {"bedrockModelId": "amazon nova"})


@pytest.mark.parametrize(
    "model_id",
    [
        *MODELS,
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        APPLICATION_PROFILE,
    ],
)
def test_real_model_ids_pass_the_synth_unchanged(model_id):
    config = load_config(App(context={"bedrockModelId": model_id}).node, {})
    assert config.bedrock_model_id == model_id


# -- the synthesised compactor ---------------------------------------------------------


@pytest.fixture(scope="module")
def with_a_profile() -> tuple[Any, dict[str, Any]]:
    """Synthesised offline, as the session's default stack is (see conftest)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(("AWS_", "CDK_DEFAULT"))]:
            patch.delenv(name)
        stack, template = synthesise({"bedrockModelId": "us.amazon.nova-lite-v1:0"})
    return stack, template.to_json()["Resources"]


def compactor_bedrock_statements(stack: Any, resources: dict[str, Any]) -> list[dict[str, Any]]:
    role = stack.resolve(stack.compaction.compactor.role.role_name)
    return [
        shown(stack, statement)
        for policy in of_type(resources, "AWS::IAM::Policy").values()
        if role in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("bedrock:") for a in as_list(statement["Action"]))
    ]


def test_the_compactor_invokes_a_profile_and_its_model_not_a_prefixed_model(with_a_profile):
    stack, resources = with_a_profile
    statements = compactor_bedrock_statements(stack, resources)
    profile = (
        "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:"
        "inference-profile/us.amazon.nova-lite-v1:0"
    )
    assert statements == [
        {"Action": "bedrock:InvokeModel", "Effect": "Allow", "Resource": profile},
        {
            "Action": "bedrock:InvokeModel",
            "Effect": "Allow",
            "Resource": "arn:${AWS::Partition}:bedrock:*::foundation-model/amazon.nova-lite-v1:0",
            "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": profile}},
        },
    ]
    # The id as configured is what the summariser sends, so the profile is what it calls.
    (compactor,) = [
        f
        for f in of_type(resources, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "compactor.handler.lambda_handler"
    ]
    assert compactor["Properties"]["Environment"]["Variables"]["BEDROCK_MODEL_ID"] == (
        "us.amazon.nova-lite-v1:0"
    )


def test_the_workflow_invokes_the_profile_it_names_and_its_model_through_it(with_a_profile):
    stack, resources = with_a_profile
    role = stack.resolve(stack.workflow.state_machine.role.role_name)
    statements = [
        shown(stack, statement)
        for policy in of_type(resources, "AWS::IAM::Policy").values()
        if role in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("bedrock:") for a in as_list(statement["Action"]))
    ]
    profile = (
        "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:"
        "inference-profile/us.amazon.nova-lite-v1:0"
    )
    assert {"Action": "bedrock:InvokeModel", "Effect": "Allow", "Resource": profile} in statements
    assert {
        "Action": "bedrock:InvokeModel",
        "Effect": "Allow",
        "Resource": "arn:${AWS::Partition}:bedrock:*::foundation-model/amazon.nova-lite-v1:0",
        "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": profile}},
    } in statements
    assert not [s for s in statements if "foundation-model/us." in json.dumps(s)]
    machine = next(iter(of_type(resources, "AWS::StepFunctions::StateMachine").values()))
    assert '"ModelId":"us.amazon.nova-lite-v1:0"' in flatten(
        machine["Properties"]["DefinitionString"]
    )
    assert stack.workflow.model_grant.nag_findings[0] in acknowledged(stack.workflow)


def acknowledged(construct: Any) -> set[str]:
    return {
        rule.removeprefix("Annotation::")
        for entry in construct.node.metadata
        if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule in entry.data
    }


def test_the_models_any_region_is_acknowledged_only_when_a_profile_is_granted(
    with_a_profile, synthesised
):
    # The profile's synth passed cdk-nag: its finding is acknowledged, on the compactor only.
    finding = (
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:*::foundation-model/"
        "amazon.nova-lite-v1:0]"
    )
    stack, _ = with_a_profile
    assert stack.compaction.model_grant.nag_findings == (finding,)
    assert finding in acknowledged(stack.compaction.compactor)
    default_stack, _ = synthesised
    assert not [r for r in acknowledged(default_stack.compaction.compactor) if "bedrock" in r]
