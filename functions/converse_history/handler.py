"""The converse-history Lambda's entry point: API Gateway routes and direct invocation.

Thin by design: parse and validate, call the service, shape the answer. The
settings and the environment are validated at import, so a bad window or a
missing table fails the cold start with the reason instead of serving.
"""

# No `from __future__ import annotations` here: Powertools reads the route
# functions' annotations at runtime to validate requests and build the OpenAPI.
import base64
import binascii
import dataclasses
import functools
import json
import re
from typing import Annotated, Any
from urllib.parse import unquote

import boto3
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from adapters.compaction_queue import CompactionQueue
from adapters.dynamodb_store import DynamoDBConversationStore
from adapters.rules_source import AppConfigRulesSource, FileRulesSource, RulesSource
from converse_history.api_models import (
    CONTACT_ID_PATTERN,
    MESSAGE_ID_PATTERN,
    ConverseRequest,
    ConverseResponse,
    ErrorResponse,
    HealthResponse,
    MemoryResponse,
    MessageBody,
    RecordTurnRequest,
    RecordTurnResponse,
)
from converse_history.environment import Environment, load_environment
from converse_history.errors import ApiError, invalid, not_found
from converse_history.service import Caller, ConverseService, Incoming
from converse_history.telemetry import PowertoolsTelemetry
from converse_history.workflow_answer import (
    WORKFLOW,
    refuse_what_cannot_fit,
    reply_text,
    reply_usage,
    workflow_answer,
)
from memory_core.rules import TENANT_ID_PATTERN
from memory_core.settings import Settings, load_settings
from memory_core.strict_json import (
    DUPLICATE_KEY,
    NOT_JSON,
    NUMBER_TOO_LARGE,
    TOO_DEEP,
    strict_loads,
)
from memory_core.usage import TokenUsage

logger = Logger()
metrics = Metrics()
tracer = Tracer()

SETTINGS = load_settings()
ENVIRONMENT = load_environment()
TELEMETRY = PowertoolsTelemetry(logger, metrics)

BASE = "/v1/tenants/<tenant_id>/contacts/<contact_id>"
TenantId = Annotated[
    str, Path(pattern=TENANT_ID_PATTERN, description="the tenant, as in the rules")
]
ContactId = Annotated[str, Path(pattern=CONTACT_ID_PATTERN, description="the contact")]
_ERROR_DESCRIPTIONS = {
    400: "invalid request; the message names the field",
    403: "the caller may not act for this tenant",
    404: "unknown tenant",
    409: "the message id was recorded before with other content, or the conversation was busy",
    413: "the message is over the store's item limit; nothing written",
    422: "sentAt more than 5 minutes in the future; nothing written",
    415: "the body is not application/json",
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


def _answers(success: int, description: str, *errors: int, **described: str) -> dict[int, Any]:
    """A route's documented answers: its success (body from the return annotation), its errors.

    With `responses=` Powertools documents only what it is given, so the success
    is listed here too; `described` rewords an error for the route (`e404=...`).
    """
    answers: dict[int, Any] = {success: {"description": description}}
    for status in errors:
        answers[status] = {
            **ERRORS[status],
            "description": described.get(f"e{status}", ERRORS[status]["description"]),
        }
    return answers


def _rules_source(environment: Environment, settings: Settings) -> RulesSource:
    if environment.rules_source == "appconfig":
        # The environment's validator guarantees all three names for this source.
        assert environment.appconfig_application
        assert environment.appconfig_environment
        assert environment.appconfig_profile
        source = AppConfigRulesSource(
            application=environment.appconfig_application,
            environment=environment.appconfig_environment,
            profile=environment.appconfig_profile,
            turn_retention_days=settings.turn_retention_days,
            on_rejected=TELEMETRY.rules_rejected,
            max_age_seconds=environment.rules_max_age_seconds,
        )
        source.current()  # unusable rules fail the cold start, not the first request
        return source
    return FileRulesSource(
        environment.rules_file, settings.turn_retention_days, on_rejected=TELEMETRY.rules_rejected
    )


RULES = _rules_source(ENVIRONMENT, SETTINGS)
SERVICE = ConverseService(
    store=DynamoDBConversationStore(
        boto3.client("dynamodb"), ENVIRONMENT.table_name, SETTINGS.turn_retention_days
    ),
    queue=CompactionQueue(lambda: boto3.client("sqs"), ENVIRONMENT.compaction_queue_url),
    rules=RULES,
    settings=SETTINGS,
    telemetry=TELEMETRY,
)

# Powertools answers a `JSONDecodeError` from the deserializer with a 400 (`_invalid`);
# strict_loads raises nothing else, and refuses what Python's parser lets through:
# NaN, 1e400, a 5,000-digit integer, a body nested past the recursion limit, a key
# given twice (Python keeps the last: `{"text": "a", "text": "b"}` would be "b").
app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=strict_loads)


def _caller() -> Caller:
    identity = app.current_event.request_context.identity
    return Caller(
        arn=identity.user_arn, identity_required=ENVIRONMENT.caller_identity == "required"
    )


def _incoming(body: MessageBody, role: str) -> Incoming:
    return Incoming(id=body.id, role=role, content=body.blocks(), sent_at=body.sent_at)  # type: ignore[arg-type]


def _usage(body: RecordTurnRequest) -> TokenUsage | None:
    return body.usage.token_usage() if body.usage is not None else None


@app.post(
    f"{BASE}/converse",
    responses=_answers(
        200, "the decision and the bounded history", 400, 403, 404, 409, 413, 415, 422, 429
    ),
    summary="record the contact's message, get the history",
)
@tracer.capture_method(capture_response=False)  # responses hold message text
def converse(tenant_id: TenantId, contact_id: ContactId, body: ConverseRequest) -> ConverseResponse:
    result = SERVICE.converse(tenant_id, contact_id, _incoming(body.message, "user"), _caller())
    return ConverseResponse.model_validate(result)


@app.post(
    f"{BASE}/turns",
    status_code=201,
    responses=_answers(201, "the turn as recorded", 400, 403, 404, 409, 413, 415, 422),
    summary="record a reply",
)
@tracer.capture_method(capture_response=False)  # responses hold message text
def record_turn(
    tenant_id: TenantId, contact_id: ContactId, body: RecordTurnRequest
) -> RecordTurnResponse:
    result = SERVICE.record(
        tenant_id, contact_id, _incoming(body, body.role), _caller(), usage=_usage(body)
    )
    return RecordTurnResponse.model_validate(result)


@app.get(
    f"{BASE}/memory",
    responses=_answers(
        200,
        "the fold and the counters",
        400,
        403,
        404,
        e404="unknown tenant, or nothing recorded for the contact",
    ),
    summary="the fold and the counters",
)
@tracer.capture_method(capture_response=False)  # responses hold message text
def read_memory(tenant_id: TenantId, contact_id: ContactId) -> MemoryResponse:
    result = SERVICE.memory(tenant_id, contact_id, _caller())
    if result is None:
        raise not_found(f"nothing recorded for contact {contact_id!r}")
    return MemoryResponse.model_validate(result)


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
    return Response(200, content_types.APPLICATION_JSON, _openapi_document())


@app.not_found
def _no_route(_: Exception) -> Response[str]:
    """404 for a path no route has; 405 with `Allow` for a path routed for other methods."""
    event = app.current_event
    allowed = allowed_methods(event.path)
    if not allowed:
        return _error_response(
            ApiError(404, "not_found", f"no route for {event.http_method} {event.path}")
        )
    return _error_response(
        ApiError(
            405,
            "method_not_allowed",
            f"{event.http_method} is not allowed on {event.path}; use {', '.join(allowed)}",
            headers={"Allow": ", ".join(allowed)},
        )
    )


def allowed_methods(path: str) -> list[str]:
    """The methods the resolver routes for `path`, sorted; none for a path it does not know.

    Read from the resolver's own route table (Powertools keeps no public view of it),
    matched with the routes' own patterns, so `Allow` cannot disagree with the routing.
    """
    routes = app._static_routes + app._dynamic_routes
    return sorted({route.method.upper() for route in routes if route.rule.match(path)})


@app.exception_handler(ApiError)  # type: ignore[untyped-decorator]
def _refused(error: ApiError) -> Response[str]:
    return _error_response(error)


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
def _invalid(error: RequestValidationError) -> Response[str]:
    return _error_response(_first_invalid_field(error.errors()))


@app.exception_handler(Exception)  # type: ignore[untyped-decorator]
def _failed(error: Exception) -> Response[str]:
    # Not bad input (that is a 4xx above) but a fault that outlived the retries:
    # logged with its traceback, answered in the API's error shape, never with it.
    logger.exception("request_failed", extra={"error": type(error).__name__})
    return _error_response(
        ApiError(500, "internal_error", "the request failed; retry with the same message id")
    )


def _error_response(error: ApiError) -> Response[str]:
    return Response(
        error.status,
        content_types.APPLICATION_JSON,
        json.dumps(error.body()),
        headers=error.headers or None,
    )


def _first_invalid_field(errors: Any) -> ApiError:
    details = list(errors)
    if not details:
        return invalid("body", "invalid request")
    first = details[0]
    if first.get("type") == "json_invalid":
        reason = str((first.get("ctx") or {}).get("error"))
        named = reason in _JSON_REFUSALS or reason.startswith(DUPLICATE_KEY)
        return invalid("body", f"not valid JSON ({reason})" if named else "not valid JSON")
    loc = [str(part) for part in first.get("loc", ()) if part not in ("body", "path", "query")]
    loc = [_PATH_NAMES.get(part, part) for part in loc]
    field = ".".join(loc) or "body"
    reasons = "; ".join(_reason(d) for d in details[1:4])
    message = _message(first) + (f" (also: {reasons})" if reasons else "")
    return invalid(field, message)


def _message(detail: Any) -> str:
    return str(detail.get("msg", "invalid")).removeprefix("Value error, ")


_PATH_NAMES = {"tenant_id": "tenantId", "contact_id": "contactId"}
_JSON_REFUSALS = frozenset({NOT_JSON, NUMBER_TOO_LARGE, TOO_DEEP})
"""strict_json's own refusals, shown with the key named; the parser's (`Expecting value`) not."""


def _reason(detail: Any) -> str:
    where = ".".join(str(p) for p in detail.get("loc", ()) if p not in ("body", "path"))
    return f"{where}: {_message(detail)}" if where else _message(detail)


@functools.cache
def _openapi_document() -> str:
    """The resolver's OpenAPI document, without the validation answer this API never gives.

    Built on the first `GET /openapi.json`, not at import: it is half a bare
    `import boto3` (docs/performance.md), and no converse call needs it.

    Powertools documents a 422 `HTTPValidationError` on every route; here a
    request that fails validation is answered 400 with the `ErrorResponse`
    body (`_invalid`), and 422 means only `sent_at_in_future`. The routes'
    own answers (`responses=`) replace it where they list a 422; elsewhere it
    is dropped, with the schemas only it referred to.
    """
    document = json.loads(
        app.get_openapi_json_schema(
            title="Conversation memory",
            version="1.0.0",
            description="Record a conversation's turns and get a bounded, Converse-ready history.",
        )
    )
    for operations in document["paths"].values():
        for operation in operations.values():
            answers = operation["responses"]
            if _VALIDATION_ERROR_REF in json.dumps(answers.get("422", {})):
                del answers["422"]
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        referred = json.dumps({k: v for k, v in document.items() if k != "components"})
        others = json.dumps({k: v for k, v in schemas.items() if k != name})
        if f'"#/components/schemas/{name}"' not in referred + others:
            schemas.pop(name, None)
    return json.dumps(document)


_VALIDATION_ERROR_REF = "#/components/schemas/HTTPValidationError"


# -- direct invocation (Step Functions) ----------------------------------------------


def _direct(event: dict[str, Any]) -> dict[str, Any]:
    action = event.get("action")
    try:
        tenant_id, contact_id = _direct_ids(event)
        caller = Caller(arn=None, identity_required=False)
        if action == "converse":
            request = ConverseRequest.model_validate({"message": event.get("message")})
            incoming = _incoming(request.message, "user")
            if event.get("for") != WORKFLOW:
                return SERVICE.converse(tenant_id, contact_id, incoming, caller)
            return _for_the_workflow(tenant_id, contact_id, incoming, event, caller)
        if action == "record":
            fields = {k: v for k, v in event.items() if k not in _DIRECT_KEYS}
            model_usage = None
            if "modelReply" in fields:
                model_reply = fields.pop("modelReply")
                fields["text"] = reply_text(model_reply)
                model_usage = reply_usage(model_reply, on_unreadable=TELEMETRY.usage_unreadable)
            body = RecordTurnRequest.model_validate(fields)
            usage = _usage(body) or model_usage
            incoming = _incoming(body, body.role)
            return SERVICE.record(tenant_id, contact_id, incoming, caller, usage=usage)
        raise invalid("action", "must be 'converse' or 'record'")
    except ValidationError as error:
        api_error = _first_invalid_field(error.errors())
        return {**api_error.body(), "statusCode": api_error.status}
    except ApiError as error:
        return {**error.body(), "statusCode": error.status}


_DIRECT_KEYS = {"action", "tenantId", "contactId"}


def _for_the_workflow(
    tenant_id: str, contact_id: str, incoming: Incoming, event: dict[str, Any], caller: Caller
) -> dict[str, Any]:
    """The converse for the Step Functions workflow: its state, sized for Step Functions.

    The workflow draws `defaultMessageId` once, before the task, so a retry after
    the commit replays the message instead of recording it again.
    """
    default_id = event.get("defaultMessageId")
    if incoming.id is None and default_id is not None:
        if not isinstance(default_id, str) or not re.fullmatch(MESSAGE_ID_PATTERN, default_id):
            raise invalid("defaultMessageId", f"must match {MESSAGE_ID_PATTERN}")
        incoming = dataclasses.replace(incoming, id=default_id)
    refuse_what_cannot_fit(incoming.content)
    answer = SERVICE.converse(tenant_id, contact_id, incoming, caller)
    state, fitted = workflow_answer(tenant_id, contact_id, answer, incoming.content)
    if fitted is not None and (fitted.omitted_messages or fitted.memory_omitted):
        TELEMETRY.workflow_input_shortened(fitted.omitted_messages, fitted.memory_omitted)
    return state


def _direct_ids(event: dict[str, Any]) -> tuple[str, str]:
    tenant_id, contact_id = event.get("tenantId"), event.get("contactId")
    if not isinstance(tenant_id, str) or not re.fullmatch(TENANT_ID_PATTERN, tenant_id):
        raise invalid("tenantId", f"must match {TENANT_ID_PATTERN}")
    if not isinstance(contact_id, str) or not re.fullmatch(CONTACT_ID_PATTERN, contact_id):
        raise invalid("contactId", f"must match {CONTACT_ID_PATTERN}")
    return tenant_id, contact_id


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "action" in event:
        return _direct(event)
    event = _with_decoded_path(event)
    if _reads_a_body(event):
        event, refusal = _json_text_body(event)
        if refusal is not None:
            return _proxy_answer(refusal)
    return app.resolve(_with_canonical_media_type(event), context)


# -- the proxy event, as the routes expect it ----------------------------------------

_ID_CHARACTERS = re.compile(r"[A-Za-z0-9_.:@+-]*")


def _with_decoded_path(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its path segments percent-decoded where they decode to id characters.

    API Gateway's REST `path` keeps the client's percent-encoding, and
    Powertools reads the path parameters from it: `alice%40example.com` is the
    contact `alice@example.com`. Only a segment that decodes to id characters
    is decoded, so `a%2Fb` or `a%23b` stays as sent and is refused by the id
    pattern, with the field named, rather than rerouted.
    """
    path = event.get("path")
    if isinstance(path, str) and "%" in path:
        return {**event, "path": "/".join(_decoded(part) for part in path.split("/"))}
    return event


def _with_canonical_media_type(event: dict[str, Any]) -> dict[str, Any]:
    """The event with a JSON media type spelled `application/json`, as Powertools matches it.

    Media types are case-insensitive, and a `charset` was checked by `_json_text_body`.
    """
    headers = event.get("headers") or {}
    for name, value in headers.items():
        if name.lower() == "content-type" and isinstance(value, str):
            if value != "application/json" and _media_type(value) == "application/json":
                return {**event, "headers": {**headers, name: "application/json"}}
            break
    return event


def _decoded(segment: str) -> str:
    if "%" not in segment:
        return segment
    try:
        decoded = unquote(segment, errors="strict")
    except UnicodeDecodeError:
        return segment
    return decoded if _ID_CHARACTERS.fullmatch(decoded) else segment


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _reads_a_body(event: dict[str, Any]) -> bool:
    """A POST to a path routed for POST: the requests whose body the routes read.

    A POST elsewhere is answered 404 or 405 by the resolver, before any body matters.
    """
    path = event.get("path")
    return (
        str(event.get("httpMethod", "")).upper() == "POST"
        and isinstance(path, str)
        and "POST" in allowed_methods(path)
    )


_UTF_8 = frozenset({"utf-8", "utf8"})


def _json_text_body(event: dict[str, Any]) -> tuple[dict[str, Any], ApiError | None]:
    """The event with its body as UTF-8 JSON text, or the refusal of a body that is not.

    A body that is not JSON gets 415 (not Powertools' form parsing or its own 415
    shape); a `charset` other than UTF-8 gets 400. A body API Gateway passed
    base64-encoded (`application/json` is a binary media type of the API, so the
    bytes arrive as sent) is decoded strictly: bytes that are not UTF-8 get 400
    and never become replacement characters. Powertools would decode it itself,
    with a UnicodeDecodeError (a 500) on such bytes.
    """
    headers = event.get("headers") or {}
    content_type = next(
        (v for k, v in headers.items() if k.lower() == "content-type" and isinstance(v, str)), ""
    )
    if _media_type(content_type) not in ("", "application/json"):
        refusal = ApiError(
            415,
            "unsupported_media_type",
            f"Content-Type: {content_type[:100]!r}; the body must be application/json",
        )
        return event, refusal
    charset = _charset(content_type)
    if charset is not None and charset.lower() not in _UTF_8:
        return event, invalid(
            "body", f"Content-Type charset {charset[:40]!r}: the body must be UTF-8 JSON"
        )
    body = event.get("body")
    if not event.get("isBase64Encoded") or not isinstance(body, str):
        return event, None
    try:
        raw = base64.b64decode(body, validate=True)
    except binascii.Error:
        return event, invalid("body", "marked isBase64Encoded, but not base64")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return event, invalid(
            "body",
            f"not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); "
            "send the JSON encoded as UTF-8",
        )
    return {**event, "body": text, "isBase64Encoded": False}, None


def _charset(content_type: str) -> str | None:
    """The `charset` parameter of a Content-Type, unquoted; None when it has none."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"')
    return None


def _proxy_answer(error: ApiError) -> dict[str, Any]:
    return {
        "statusCode": error.status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON, **error.headers},
        "body": json.dumps(error.body()),
        "isBase64Encoded": False,
    }
