#!/usr/bin/env python3
"""The CDK app. It makes no AWS calls, so `cdk synth` runs offline without credentials."""

from __future__ import annotations

import aws_cdk as cdk

from infra.stack import ConversationMemoryStack


def build_app() -> cdk.App:
    app = cdk.App()
    ConversationMemoryStack(app, "ConversationMemory")
    return app


if __name__ == "__main__":
    build_app().synth()
