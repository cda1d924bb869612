"""The service's refusals as exceptions, one class per kind, each carrying the API's code.

Both transports answer a refusal in the API's error shape,
`{"error": {"code", "message", ...}}` with its status (over HTTP, the
response's; over Lambda, the payload's `statusCode`), and `error_for` makes it
the exception of its kind. Two the client raises itself: `ServiceUnavailable`
(the service failed or throttled on every attempt) and `NotConfigured` (no AWS
credentials or region to make the call with, so nothing was sent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_RETRY_AFTER_SECONDS = 1
"""A `rate_limited` answer always says when; this stands in should it ever not."""


class MemoryServiceError(Exception):
    """A call the service refused or could not answer, or that the client could not make:
    its HTTP status (0 when nothing was sent), code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class InvalidRequest(MemoryServiceError):
    """400: the request was refused; the message names the first invalid field."""


class Forbidden(MemoryServiceError):
    """403: the caller may not act for the tenant (or IAM refused the call)."""


class UnknownTenant(MemoryServiceError):
    """404 `unknown_tenant`: the tenant is not in the service's rules."""


class NotFound(MemoryServiceError):
    """404, any other code: e.g. nothing recorded yet for the contact (`memory`)."""


class Conflict(MemoryServiceError):
    """409: the conversation stayed busy, or the message id was used for another message."""


class MessageTooLarge(MemoryServiceError):
    """413: the message is over what the service stores (or the gateway takes)."""


class UnsupportedMediaType(MemoryServiceError):
    """415: the body was not sent as JSON."""


class SentInFuture(MemoryServiceError):
    """422: the message's `sentAt` is more than five minutes ahead of the service's clock."""


class RateLimited(MemoryServiceError):
    """429 `rate_limited`: the contact sent too many messages; this one was not recorded.

    Never retried by the client: waiting `retry_after_seconds` is the caller's choice.
    """

    def __init__(self, status: int, code: str, message: str, *, retry_after_seconds: int) -> None:
        super().__init__(status, code, message)
        self.retry_after_seconds = retry_after_seconds


class ServiceUnavailable(MemoryServiceError):
    """A 5xx, throttling or a connection failure on every attempt the client made."""


class NotConfigured(MemoryServiceError):
    """No AWS credentials or no region to sign or route the call with: nothing was sent.

    `status` is 0 and `code` says what is missing: `no_region`, `no_credentials`,
    `partial_credentials` (a key without its secret), `profile_not_found`, or
    `credentials_unavailable` (a configured source failed: an expired SSO session, a
    role that could not be assumed). The message says what to set; the botocore error
    behind it is the `__cause__`. Never retried: the next attempt would fail alike.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(0, code, message)
        self.args = (f"{code}: {message}",)  # no status to show: nothing was sent


_BY_STATUS: dict[int, type[MemoryServiceError]] = {
    400: InvalidRequest,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: MessageTooLarge,
    415: UnsupportedMediaType,
    422: SentInFuture,
}


def error_code_and_message(status: int, body: Any) -> tuple[str, str]:
    """The API's code and message; for a body not in its shape (a gateway's own
    refusal, `{"message": "Forbidden"}`, or no JSON at all), `http_<status>` and
    whatever message the body has."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and isinstance(error.get("code"), str):
        return str(error["code"]), str(error.get("message", ""))
    message = body.get("message") if isinstance(body, Mapping) else None
    return f"http_{status}", str(message) if message is not None else f"HTTP status {status}"


def error_for(status: int, body: Any, retry_after_header: str | None = None) -> MemoryServiceError:
    """The exception for a refusal answered with `status` and `body`."""
    code, message = error_code_and_message(status, body)
    if status == 404 and code == "unknown_tenant":
        return UnknownTenant(status, code, message)
    if status == 429 and code == "rate_limited":
        return RateLimited(
            status,
            code,
            message,
            retry_after_seconds=_retry_after_seconds(body, retry_after_header),
        )
    if status >= 500:
        return ServiceUnavailable(status, code, message)
    return _BY_STATUS.get(status, MemoryServiceError)(status, code, message)


def _retry_after_seconds(body: Any, header: str | None) -> int:
    """The body's `retryAfterSeconds` (the service sends it and `Retry-After` alike)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    seconds = error.get("retryAfterSeconds") if isinstance(error, Mapping) else None
    if isinstance(seconds, int) and not isinstance(seconds, bool):
        return seconds
    if header is not None and header.strip().isdigit():
        return int(header.strip())
    return DEFAULT_RETRY_AFTER_SECONDS
