"""What the client needs of the AWS configuration, and what it says when that is missing.

botocore (and boto3) read the region from `AWS_DEFAULT_REGION`, else from the
`region` of the profile (`AWS_PROFILE`, else `default`) in the config file
(`AWS_CONFIG_FILE`, `~/.aws/config` by default). They do not read `AWS_REGION`,
which other AWS SDKs and the Lambda runtime use. Credentials come from botocore's
chain: `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`
for temporary ones), the profile's in the credentials file
(`AWS_SHARED_CREDENTIALS_FILE`, `~/.aws/credentials`) or the config file (SSO,
an assumed role, `credential_process`), then a container or instance role.

botocore's errors for a missing or broken configuration become `NotConfigured`,
the client's own, with a message that says what to set.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from botocore.exceptions import (
    ConfigParseError,
    CredentialRetrievalError,
    InvalidConfigError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    RefreshWithMFAUnsupportedError,
    SSOError,
    TokenRetrievalError,
)

from conversation_memory_client.errors import NotConfigured

REGION_ADVICE = (
    "pass region=..., or set AWS_DEFAULT_REGION (botocore reads that one, not AWS_REGION), "
    "or a `region` in your profile of ~/.aws/config"
)
CREDENTIALS_ADVICE = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN with "
    "temporary credentials), or AWS_PROFILE to a profile of ~/.aws/credentials or "
    "~/.aws/config, or run where a role provides them (Lambda, ECS, EC2)"
)

CONFIGURATION_ERRORS: tuple[type[Exception], ...] = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    TokenRetrievalError,
    SSOError,
    RefreshWithMFAUnsupportedError,
    ProfileNotFound,
    NoRegionError,
    InvalidConfigError,
    ConfigParseError,
)
"""botocore's errors that say the caller's AWS configuration, not the service, is wrong."""


def no_region(target: str) -> NotConfigured:
    """No region for `target` ("requests to <url>", "invoking <function>")."""
    return NotConfigured("no_region", f"no AWS region for {target}: {REGION_ADVICE}")


def no_credentials(target: str) -> NotConfigured:
    """No credentials anywhere in botocore's chain for `target`."""
    return NotConfigured("no_credentials", f"no AWS credentials for {target}: {CREDENTIALS_ADVICE}")


def not_configured(error: Exception, target: str) -> NotConfigured:
    """The client's exception for one of `CONFIGURATION_ERRORS` raised for `target`."""
    if isinstance(error, NoRegionError):
        return no_region(target)
    if isinstance(error, NoCredentialsError):
        return no_credentials(target)
    if isinstance(error, PartialCredentialsError):
        return NotConfigured(
            "partial_credentials",
            f"incomplete AWS credentials for {target} ({error}): give the key id and its "
            "secret together (AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY), or neither",
        )
    if isinstance(error, ProfileNotFound):
        return NotConfigured(
            "profile_not_found",
            f"{error}, for {target}: AWS_PROFILE names a profile in neither ~/.aws/config "
            "nor ~/.aws/credentials; unset it, or create the profile "
            "(`aws configure --profile NAME`)",
        )
    if isinstance(error, InvalidConfigError | ConfigParseError):
        return NotConfigured(
            "invalid_config",
            f"the AWS configuration for {target} could not be read ({error}): fix "
            "~/.aws/config (or the file AWS_CONFIG_FILE names)",
        )
    return NotConfigured(
        "credentials_unavailable",
        f"the configured AWS credentials for {target} could not be obtained ({error}): "
        f"refresh them (`aws sso login` for an SSO profile), or {CREDENTIALS_ADVICE}",
    )


def is_loopback(url: str) -> bool:
    """Whether the URL's host is this machine's loopback: `localhost`, 127.0.0.0/8, `::1`."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
