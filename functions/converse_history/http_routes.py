"""The HTTP API's routes: parse, call the service, shape the answer.

Powertools validates each request against the route's annotations and builds
the OpenAPI document from them. A refusal raised anywhere (`ApiError`, or a
body pydantic refused) is answered in the API's error shape; a fault that
outlived the retries is logged and answered 500, never with its traceback.
"""

# No `from __future__ import annotations` here: Powertools reads the route
# functions' annotations at runtime to validate requests and build the OpenAPI.
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from converse_history.access import Caller
from converse_history.api_models import (
    CONTACT_ID_PATTERN,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_MAX,
    ContactsResponse,
    ConverseRequest,
    ConverseResponse,
    ErasureResponse,
    HealthResponse,
    MemoryResponse,
    PreviewResponse,
    RecallRequest,
    RecallResponse,
    RecordTurnRequest,
    RecordTurnResponse,
    TurnsResponse,
)
from converse_history.contacts import ContactsListing
from converse_history.erase import ContactErasure
from converse_history.errors import ApiError, invalid_request, not_found
from converse_history.export import TurnsExport
from converse_history.incoming import incoming, reported_usage
from converse_history.openapi_document import answers, openapi_document
from converse_history.preview import WindowPreview
from converse_history.proxy_event import allowed_methods
from converse_history.recall_search import RecallSearch
from converse_history.service import ConverseService
from memory_core.rules import TENANT_ID_PATTERN
from memory_core.strict_json import strict_loads

BASE = "/v1/tenants/<tenant_id>/contacts/<contact_id>"
_ANYTHING_ELSE = (
    "; percent-encoded characters are read decoded (`%40` is `@`); anything else (a control "
    "character, a space, `/`, non-ASCII) is refused 400, naming the id"
)
TENANT_ID_DESCRIPTION = (
    "the tenant, as in the rules: 1 to 64 characters, ASCII letters, digits, `_` and `-`, "
    "starting with a letter or a digit" + _ANYTHING_ELSE
)
CONTACT_ID_DESCRIPTION = (
    "the contact: 1 to 128 characters, ASCII letters, digits and `_ . : @ + -`, starting "
    "with a letter, a digit or `+` (`alice@example.com`, `+33612345678`)" + _ANYTHING_ELSE
)
TenantId = Annotated[str, Path(pattern=TENANT_ID_PATTERN, description=TENANT_ID_DESCRIPTION)]
ContactId = Annotated[str, Path(pattern=CONTACT_ID_PATTERN, description=CONTACT_ID_DESCRIPTION)]
PageLimit = Annotated[
    int,
    Query(ge=1, le=PAGE_LIMIT_MAX, description=f"items per page, 1 to {PAGE_LIMIT_MAX}"),
]
PageCursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=1024,
        description="the previous page's `nextCursor`; none for the first page",
    ),
]


@dataclass(frozen=True, slots=True)
class DataRoutes:
    """The use cases of a conversation's data (SPEC 10), each in its own module."""

    export: TurnsExport
    contacts: ContactsListing
    erasure: ContactErasure
    preview: WindowPreview
    recall: RecallSearch


def build_resolver(
    service: ConverseService, data: DataRoutes, *, identity_required: bool, logger: Logger
) -> APIGatewayHttpResolver:
    # Powertools answers a `JSONDecodeError` from the deserializer with a 400 (`invalid_request`);
    # strict_loads raises nothing else, and refuses what Python's parser lets through:
    # NaN, 1e400, a 5,000-digit integer, a body nested past the recursion limit, a key
    # given twice (Python keeps the last: `{"text": "a", "text": "b"}` would be "b").
    app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=strict_loads)

    def caller() -> Caller:
        # The SigV4-signed principal API Gateway's IAM authorisation verified.
        iam = app.current_event.request_context.authorizer.iam
        return Caller(arn=iam.user_arn or None, identity_required=identity_required)

    _conversation_routes(app, service, caller)
    _data_routes(app, data, caller)
    _service_routes(app)
    _error_answers(app, logger)
    return app


def _conversation_routes(
    app: APIGatewayHttpResolver, service: ConverseService, caller: Callable[[], Caller]
) -> None:
    @app.post(
        f"{BASE}/converse",
        responses=answers(
            200, "the decision and the bounded history", 400, 403, 404, 409, 413, 415, 422, 429
        ),
        summary="record the contact's message, get the history",
    )
    def converse(
        tenant_id: TenantId, contact_id: ContactId, body: ConverseRequest
    ) -> ConverseResponse:
        message = incoming(body.message, "user")
        return ConverseResponse.model_validate(
            service.converse(tenant_id, contact_id, message, caller())
        )

    @app.post(
        f"{BASE}/turns",
        status_code=201,
        responses=answers(201, "the turn as recorded", 400, 403, 404, 409, 413, 415, 422),
        summary="record a reply",
    )
    def record_turn(
        tenant_id: TenantId, contact_id: ContactId, body: RecordTurnRequest
    ) -> RecordTurnResponse:
        reply, usage = incoming(body, body.role), reported_usage(body)
        return RecordTurnResponse.model_validate(
            service.record(tenant_id, contact_id, reply, caller(), usage=usage)
        )

    @app.get(
        f"{BASE}/memory",
        responses=answers(
            200,
            "the fold and the counters",
            400,
            403,
            404,
            e404="unknown tenant, or nothing recorded for the contact",
        ),
        summary="the fold and the counters",
    )
    def read_memory(tenant_id: TenantId, contact_id: ContactId) -> MemoryResponse:
        result = service.memory(tenant_id, contact_id, caller())
        if result is None:
            raise not_found(f"nothing recorded for contact {contact_id!r}")
        return MemoryResponse.model_validate(result)


def _data_routes(
    app: APIGatewayHttpResolver, data: DataRoutes, caller: Callable[[], Caller]
) -> None:
    @app.get(
        f"{BASE}/turns",
        responses=answers(
            200,
            "a page of the contact's turns, oldest first, exactly as recorded",
            400,
            403,
            404,
            e404="unknown tenant, or nothing stored for the contact",
        ),
        summary="export the contact's turns",
    )
    def export_turns(
        tenant_id: TenantId,
        contact_id: ContactId,
        limit: PageLimit = PAGE_LIMIT_DEFAULT,
        cursor: PageCursor = None,
    ) -> TurnsResponse:
        page = data.export.page(tenant_id, contact_id, caller(), limit=limit, cursor=cursor)
        return TurnsResponse.model_validate(page)

    @app.get(
        f"{BASE}/window",
        responses=answers(
            200,
            "the next call's window, previewed, and every retained turn's standing",
            400,
            403,
            404,
            e404="unknown tenant, or nothing stored for the contact",
        ),
        summary="preview the next call's window; records nothing",
    )
    def preview_window(tenant_id: TenantId, contact_id: ContactId) -> PreviewResponse:
        return PreviewResponse.model_validate(data.preview.preview(tenant_id, contact_id, caller()))

    @app.post(
        f"{BASE}/recall",
        responses=answers(
            200,
            "the contact's older turns that match, best first, each cut around its match",
            400,
            403,
            404,
            415,
            429,
        ),
        summary="find the exact words of older turns; records nothing",
    )
    def recall(tenant_id: TenantId, contact_id: ContactId, body: RecallRequest) -> RecallResponse:
        return RecallResponse.model_validate(
            data.recall.recall(tenant_id, contact_id, caller(), query=body.query, limit=body.limit)
        )

    @app.get(
        "/v1/tenants/<tenant_id>/contacts",
        responses=answers(
            200, "a page of the tenant's contacts with anything stored", 400, 403, 404
        ),
        summary="list the tenant's contacts",
    )
    def list_contacts(
        tenant_id: TenantId, limit: PageLimit = PAGE_LIMIT_DEFAULT, cursor: PageCursor = None
    ) -> ContactsResponse:
        page = data.contacts.page(tenant_id, caller(), limit=limit, cursor=cursor)
        return ContactsResponse.model_validate(page)

    @app.delete(
        "/v1/tenants/<tenant_id>/contacts/<contact_id>",
        responses={
            **answers(200, "everything stored for the contact was erased", 400, 403, 404),
            202: {
                "description": "erased: nothing recorded before erasedAt is served again; "
                "the rest is deleted asynchronously",
                "content": {"application/json": {"model": ErasureResponse}},
            },
        },
        summary="erase everything stored for the contact",
    )
    def erase_contact(tenant_id: TenantId, contact_id: ContactId) -> Response[ErasureResponse]:
        erasure = data.erasure.erase(tenant_id, contact_id, caller())
        return Response(
            erasure.status,
            content_types.APPLICATION_JSON,
            ErasureResponse.model_validate(erasure.as_json()),
        )


def _service_routes(app: APIGatewayHttpResolver) -> None:
    @app.get("/health", summary="liveness")
    def health() -> HealthResponse:
        return HealthResponse(status="ok")

    # Not in the document: HTTP's HEAD is its GET without the body, and schemathesis would
    # hold the empty answer to the GET's schema.
    @app.head("/health", include_in_schema=False)
    def health_head() -> Response[str]:
        """`GET /health` without its body, for load balancers and uptime checks."""
        return Response(200, content_types.APPLICATION_JSON, "")

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> Response[str]:
        return Response(200, content_types.APPLICATION_JSON, openapi_document(app))


def _error_answers(app: APIGatewayHttpResolver, logger: Logger) -> None:
    @app.not_found
    def no_route(_: Exception) -> Response[str]:
        """404 for a path no route has; 405 with `Allow` for a path routed for other methods."""
        event = app.current_event
        allowed = allowed_methods(app, event.path)
        if not allowed:
            return error_response(
                ApiError(404, "not_found", f"no route for {event.http_method} {event.path}")
            )
        return error_response(
            ApiError(
                405,
                "method_not_allowed",
                f"{event.http_method} is not allowed on {event.path}; use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        )

    @app.exception_handler(ApiError)  # type: ignore[untyped-decorator]
    def refused(error: ApiError) -> Response[str]:
        return error_response(error)

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def invalid(error: RequestValidationError) -> Response[str]:
        return error_response(invalid_request(error.errors()))

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def failed(error: Exception) -> Response[str]:
        # Not bad input (that is a 4xx above) but a fault that outlived the retries:
        # logged with its traceback, answered in the API's error shape, never with it.
        logger.exception("request_failed", extra={"error": type(error).__name__})
        return error_response(
            ApiError(500, "internal_error", "the request failed; retry with the same message id")
        )


def error_response(error: ApiError) -> Response[str]:
    return Response(
        error.status,
        content_types.APPLICATION_JSON,
        json.dumps(error.body()),
        headers=error.headers or None,
    )
