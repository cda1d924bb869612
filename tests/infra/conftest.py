"""One synthesised stack per module: synth with cdk-nag takes seconds."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template

from app import build_app


def synthesise(context: dict[str, str] | None = None) -> tuple[Any, Template]:
    app = build_app(context)
    stack = app.node.find_child("ConversationMemory")
    assert isinstance(stack, Stack)
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="session")
def synthesised() -> tuple[Any, Template]:
    """Synthesised with no AWS credentials or account in sight, as `cdk synth` runs offline."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith(("AWS_", "CDK_DEFAULT"))]:
            patch.delenv(name)
        return synthesise()


@pytest.fixture(scope="session")
def template(synthesised: tuple[Any, Template]) -> Template:
    return synthesised[1]


@pytest.fixture(scope="session")
def resources(template: Template) -> dict[str, Any]:
    return dict(template.to_json()["Resources"])


def of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in resources.items() if r["Type"] == kind}


def flatten(value: Any) -> str:
    """A CloudFormation value as text, tokens shown by name (for definitions built by Fn::Join)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(flatten(v) for v in value)
    if isinstance(value, dict):
        if "Fn::Join" in value:
            return flatten(value["Fn::Join"][1])
        return json.dumps(value, sort_keys=True)
    return str(value)
