#!/usr/bin/env python3
"""The CDK app. It makes no AWS calls, so `cdk synth` runs offline without credentials.

The deployment's settings are validated by the service's own settings model
here, so a window below twice the fold fails the synth with the reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

sys.path.insert(0, str(Path(__file__).resolve().parent / "functions"))

from infra.config import load_config
from infra.stack import ConversationMemoryStack


def build_app(context: dict[str, str] | None = None) -> cdk.App:
    app = cdk.App(context=context)
    config = load_config(app.node, os.environ)
    ConversationMemoryStack(
        app,
        "ConversationMemory",
        config=config,
        env=cdk.Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=os.environ.get("CDK_DEFAULT_REGION"),
        ),
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


if __name__ == "__main__":
    build_app().synth()
