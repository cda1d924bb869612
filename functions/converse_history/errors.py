"""The API's refusals: one exception, carrying the status and the JSON error code.

And how a request pydantic refused becomes one: the first invalid field, named.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_core.strict_json import DUPLICATE_KEY, NOT_JSON, NUMBER_TOO_LARGE, TOO_DEEP


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


def invalid_request(errors: Iterable[Any]) -> ApiError:
    """The 400 for a request pydantic refused: its first invalid field named, the next few after.

    Shared by the HTTP routes (Powertools' RequestValidationError) and the
    direct invocation (pydantic's ValidationError), so both name fields alike.
    """
    details = list(errors)
    if not details:
        return invalid("body", "invalid request")
    first = details[0]
    if first.get("type") == "json_invalid":
        reason = str((first.get("ctx") or {}).get("error"))
        named = reason in _JSON_REFUSALS or reason.startswith(DUPLICATE_KEY)
        return invalid("body", f"not valid JSON ({reason})" if named else "not valid JSON")
    loc = [_PATH_NAMES.get(part, part) for part in _field_path(first)]
    field = ".".join(loc) or "body"
    reasons = "; ".join(_reason(d) for d in details[1:4])
    message = _message(first) + (f" (also: {reasons})" if reasons else "")
    return invalid(field, message)


def _message(detail: Any) -> str:
    return str(detail.get("msg", "invalid")).removeprefix("Value error, ")


_PATH_NAMES = {"tenant_id": "tenantId", "contact_id": "contactId"}
_JSON_REFUSALS = frozenset({NOT_JSON, NUMBER_TOO_LARGE, TOO_DEEP})
"""strict_json's own refusals, shown with the key named; the parser's (`Expecting value`) not."""


def _field_path(detail: Any) -> list[str]:
    """Where in the request the error is, without Powertools' leading part (`body`, `path`,
    `query`: where the field came from). A field may itself be named so: recall's `query`
    is `("body", "query")` from the route and `("query",)` from a direct invocation."""
    loc = [str(part) for part in detail.get("loc", ())]
    return loc[1:] if len(loc) > 1 and loc[0] in _LOCATIONS else loc


_LOCATIONS = frozenset({"body", "path", "query"})


def _reason(detail: Any) -> str:
    where = ".".join(_field_path(detail))
    return f"{where}: {_message(detail)}" if where else _message(detail)
