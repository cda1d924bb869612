"""The API's refusals: one exception, carrying the status and the JSON error code."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refusal: its status, its code and message, and the headers that go with it.

    `details` are extra fields of the error object (a 429's `retryAfterSeconds`);
    `headers` are sent with the answer (its `Retry-After`, a 405's `Allow`).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def body(self) -> dict[str, dict[str, Any]]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}


def invalid(field: str, reason: str) -> ApiError:
    return ApiError(400, "invalid_request", f"{field}: {reason}")


def unknown_tenant(tenant_id: str) -> ApiError:
    return ApiError(404, "unknown_tenant", f"tenant {tenant_id!r} is not in the rules")


def forbidden(tenant_id: str) -> ApiError:
    return ApiError(403, "forbidden", f"the caller may not act for tenant {tenant_id!r}")


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", what)
