"""The API's OpenAPI document: each route's documented answers, and the document as served.

The routes are the source (Powertools builds the document from their
annotations and `responses=`); this module says what each error status means
and removes the validation answer Powertools documents but this API never gives.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from converse_history.api_models import ErrorResponse

_ERROR_DESCRIPTIONS = {
    400: (
        "invalid request: a body field, a path id (tenantId, contactId: see their patterns) "
        "or a header such as Content-Length; the message names it"
    ),
    403: "the caller may not act for this tenant",
    404: "unknown tenant",
    409: "the message id was recorded before with other content, or the conversation was busy",
    413: (
        "payload_too_large: the request body is over 10 MB (API Gateway's limit), or "
        "message_too_large: the message is over the store's item limit; nothing written"
    ),
    422: "sentAt more than 5 minutes in the future; nothing written",
    415: "unsupported_media_type: the Content-Type is missing or not application/json",
    429: (
        "rate_limited: over the tenant's rate limit; not recorded; Retry-After and "
        "error.retryAfterSeconds say how many seconds until the contact may send again"
    ),
}
ERRORS: dict[int, Any] = {
    status: {
        "description": description,
        "content": {"application/json": {"model": ErrorResponse}},
    }
    for status, description in _ERROR_DESCRIPTIONS.items()
}


def answers(success: int, description: str, *errors: int, **described: str) -> dict[int, Any]:
    """A route's documented answers: its success (body from the return annotation), its errors.

    With `responses=` Powertools documents only what it is given, so the success
    is listed here too; `described` rewords an error for the route (`e404=...`).
    """
    documented: dict[int, Any] = {success: {"description": description}}
    for status in errors:
        documented[status] = {
            **ERRORS[status],
            "description": described.get(f"e{status}", ERRORS[status]["description"]),
        }
    return documented


# One resolver per process: the document is built once, on the first request for it.
@functools.lru_cache(maxsize=1)
def openapi_document(resolver: APIGatewayHttpResolver) -> str:
    """The resolver's OpenAPI document, without the validation answer this API never gives.

    Built on the first `GET /openapi.json`, not at import: it is half a bare
    `import boto3` (docs/performance.md), and no converse call needs it.

    Powertools documents a 422 `HTTPValidationError` on every route; here a
    request that fails validation is answered 400 with the `ErrorResponse`
    body, and 422 means only `sent_at_in_future`. The routes' own answers
    (`responses=`) replace it where they list a 422; elsewhere it is dropped,
    with the schemas only it referred to.
    """
    document = json.loads(
        resolver.get_openapi_json_schema(
            title="Conversation memory",
            version="1.0.0",
            description="Record a conversation's turns and get a bounded, Converse-ready history.",
        )
    )
    for operations in document["paths"].values():
        for operation in operations.values():
            documented = operation["responses"]
            if _VALIDATION_ERROR_REF in json.dumps(documented.get("422", {})):
                del documented["422"]
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        referred = json.dumps({k: v for k, v in document.items() if k != "components"})
        others = json.dumps({k: v for k, v in schemas.items() if k != name})
        if f'"#/components/schemas/{name}"' not in referred + others:
            schemas.pop(name, None)
    return json.dumps(document)


_VALIDATION_ERROR_REF = "#/components/schemas/HTTPValidationError"
