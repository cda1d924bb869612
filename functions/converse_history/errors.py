"""The API's refusals: one exception, carrying the status and the JSON error code."""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


def invalid(field: str, reason: str) -> ApiError:
    return ApiError(400, "invalid_request", f"{field}: {reason}")


def unknown_tenant(tenant_id: str) -> ApiError:
    return ApiError(404, "unknown_tenant", f"tenant {tenant_id!r} is not in the rules")


def forbidden(tenant_id: str) -> ApiError:
    return ApiError(403, "forbidden", f"the caller may not act for tenant {tenant_id!r}")


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", what)
