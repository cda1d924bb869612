"""AppConfigData stubbed under Powertools' own AppConfig provider: no network, real Powertools.

moto does not serve AppConfigData (StartConfigurationSession, GetLatestConfiguration),
so the client under the provider is a botocore Stubber's.
"""

from __future__ import annotations

import io
import json
from typing import Any

import boto3  # type: ignore[import-untyped, unused-ignore]
import pytest
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS
from botocore.stub import Stubber  # type: ignore[import-untyped, unused-ignore]

APP, ENV, PROFILE = "memory", "prod", "tenant-rules"


def stubbed_provider(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    """Powertools' AppConfig provider, installed as the one `get_app_config` uses, on a stub."""
    client = boto3.client("appconfigdata")
    monkeypatch.setitem(
        DEFAULT_PROVIDERS,
        "appconfig",
        parameters.AppConfigProvider(environment=ENV, application=APP, boto3_client=client),
    )
    return Stubber(client)


def expect_session(stub: Stubber, token: str) -> None:
    """The next call: a session started for the profile, answered with `token`."""
    stub.add_response(
        "start_configuration_session",
        {"InitialConfigurationToken": token},
        {
            "ApplicationIdentifier": APP,
            "EnvironmentIdentifier": ENV,
            "ConfigurationProfileIdentifier": PROFILE,
        },
    )


def expect_configuration(stub: Stubber, document: Any, token: str, next_token: str) -> None:
    """The next call: the configuration fetched with `token`, answered with `document`."""
    stub.add_response(
        "get_latest_configuration",
        configuration(document, next_token),
        {"ConfigurationToken": token},
    )


def configuration(document: Any, next_token: str) -> dict[str, Any]:
    """GetLatestConfiguration's answer: the document (None: nothing new), the next token."""
    if document is None or isinstance(document, bytes):
        content = document or b""
    else:
        content = json.dumps(document).encode()
    return {
        "Configuration": io.BytesIO(content),  # the streaming body Powertools reads
        "NextPollConfigurationToken": next_token,
        "NextPollIntervalInSeconds": 60,
        "ContentType": "application/json",
    }
