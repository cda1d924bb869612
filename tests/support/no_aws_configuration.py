"""A newcomer's environment: no AWS credentials, no region, no profile, nothing to find.

`AWS_CONFIG_FILE` and `AWS_SHARED_CREDENTIALS_FILE` point at files that do not
exist, and the instance metadata service is off, so botocore's chain finds
nothing on a developer's laptop and on a CI host with an instance role alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest

AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_ENDPOINT_URL",
)


def clear_aws_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS_* variable, no config or credentials file, no instance metadata."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "nonexistent-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "nonexistent-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
