"""SnapStart on the converse-history Lambda: a published version behind the alias `live`,
which the API and the workflow invoke; the compactor, off every latency path, has none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import flatten, of_type

HISTORY = "converse_history.handler.lambda_handler"
COMPACTOR = "compactor.handler.lambda_handler"
# The workflow's two tasks that invoke the history Lambda (infra/workflow.py).
HISTORY_TASKS = ("RecordAndWindow", "RecordTheReply")


def function_id(resources: dict[str, Any], handler: str) -> str:
    (found,) = [
        name
        for name, r in of_type(resources, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler") == handler
    ]
    return found


@pytest.fixture(scope="module")
def history(resources: dict[str, Any]) -> str:
    """The converse-history function's logical ID."""
    return function_id(resources, HISTORY)


def published_version(resources: dict[str, Any], history: str) -> str:
    """The logical ID of the history function's published version (`current_version`)."""
    found = [
        name
        for name, r in of_type(resources, "AWS::Lambda::Version").items()
        if r["Properties"]["FunctionName"] == {"Ref": history}
    ]
    assert len(found) == 1, f"one published version of the history function, not {found}"
    return found[0]


def live_alias(resources: dict[str, Any], history: str) -> str:
    """The logical ID of the alias on that version; its `Ref` is the alias ARN."""
    version = published_version(resources, history)
    found = [
        name
        for name, r in of_type(resources, "AWS::Lambda::Alias").items()
        if r["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version, "Version"]}
    ]
    assert len(found) == 1, f"one alias on the published version, not {found}"
    return found[0]


def token(logical_id: str) -> str:
    """A `Ref` as `flatten` shows it inside a joined string."""
    return json.dumps({"Ref": logical_id}, sort_keys=True)


# -- the function, its version, its alias ----------------------------------------------


def test_the_history_function_snapshots_its_published_versions(resources, history):
    properties = resources[history]["Properties"]
    assert properties["SnapStart"] == {"ApplyOn": "PublishedVersions"}


def test_the_history_function_is_the_only_one_with_snapstart(resources, history):
    # The compactor is fed by SQS asynchronously: its cold start delays no caller, and
    # Python's snapshots are billed (caching and restores).
    snapshotted = {
        name
        for name, r in of_type(resources, "AWS::Lambda::Function").items()
        if "SnapStart" in r["Properties"]
    }
    assert snapshotted == {history}
    compactor = function_id(resources, COMPACTOR)
    assert not [
        r
        for r in of_type(resources, "AWS::Lambda::Version").values()
        if r["Properties"]["FunctionName"] == {"Ref": compactor}
    ]


def test_a_superseded_version_and_its_snapshot_are_deleted_by_the_next_deploy(resources, history):
    version = published_version(resources, history)
    assert resources[version]["DeletionPolicy"] == "Delete"
    assert resources[version]["UpdateReplacePolicy"] == "Delete"


def test_the_alias_live_points_at_the_published_version(resources, history):
    alias = live_alias(resources, history)
    properties = resources[alias]["Properties"]
    assert properties["Name"] == "live"
    assert properties["FunctionName"] == {"Ref": history}


# -- the callers invoke the alias ------------------------------------------------------


def lambda_integrations(resources: dict[str, Any]) -> dict[str, Any]:
    return {
        name: i["Properties"]["IntegrationUri"]
        for name, i in of_type(resources, "AWS::ApiGatewayV2::Integration").items()
        if i["Properties"]["IntegrationType"] == "AWS_PROXY"
    }


def test_the_api_integration_invokes_the_alias_not_the_bare_function(resources, history):
    alias = live_alias(resources, history)
    uris = lambda_integrations(resources)
    # One integration, shared by every route.
    assert list(uris.values()) == [{"Ref": alias}]


def test_api_gateway_may_invoke_the_alias_and_only_the_alias(resources, history):
    alias = live_alias(resources, history)
    permissions = [
        p["Properties"]
        for p in of_type(resources, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    # One per route: eight signed, GET and HEAD health, and $default.
    assert len(permissions) == 11
    assert all(p["FunctionName"] == {"Ref": alias} for p in permissions)


def test_the_workflow_tasks_invoke_the_alias(resources, history):
    alias = live_alias(resources, history)
    (machine,) = of_type(resources, "AWS::StepFunctions::StateMachine").values()
    text = flatten(machine["Properties"]["DefinitionString"])
    for state in HISTORY_TASKS:
        start = text.index(f'"{state}":{{')
        resource = text.index('"Resource":"', start) + len('"Resource":"')
        assert text.startswith(token(alias), resource), state
    assert history not in text


def test_the_workflow_role_may_invoke_the_alias(resources, history):
    alias = live_alias(resources, history)
    (machine,) = of_type(resources, "AWS::StepFunctions::StateMachine").values()
    role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoked = [
        resource
        for p in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "lambda:InvokeFunction" in json.dumps(s["Action"])
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    ]
    assert {"Ref": alias} in invoked
    # Neither the unqualified function ($LATEST, no snapshot) nor its every version (ARN:*).
    assert not [r for r in invoked if history in json.dumps(r)]


def test_the_stack_outputs_the_alias_arn_for_direct_callers(template, resources, history):
    alias = live_alias(resources, history)
    outputs = template.to_json()["Outputs"]
    assert outputs["HistoryAliasArn"]["Value"] == {"Ref": alias}
