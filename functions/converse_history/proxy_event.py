"""API Gateway's REST proxy event, made into what the routes expect, then resolved.

API Gateway passes the path as the client encoded it and the body as the
client sent it; Powertools reads both as they come. Here the path's id
segments are decoded, a body that is not UTF-8 JSON is refused with the API's
own error shape, and a JSON media type is spelled as Powertools matches it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext

from converse_history.errors import ApiError, invalid


def resolve(
    resolver: APIGatewayRestResolver, event: dict[str, Any], context: LambdaContext
) -> dict[str, Any]:
    """The proxy answer: the routes' answer, or the refusal of a body they cannot read."""
    event = _with_decoded_path(event)
    if _reads_a_body(resolver, event):
        event, refusal = _json_text_body(event)
        if refusal is not None:
            return _proxy_answer(refusal)
    return resolver.resolve(_with_canonical_media_type(event), context)


def allowed_methods(resolver: APIGatewayRestResolver, path: str) -> list[str]:
    """The methods the resolver routes for `path`, sorted; none for a path it does not know.

    Read from the resolver's own route table (Powertools keeps no public view of it),
    matched with the routes' own patterns, so `Allow` cannot disagree with the routing.
    """
    routes = resolver._static_routes + resolver._dynamic_routes
    return sorted({route.method.upper() for route in routes if route.rule.match(path)})


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


def _reads_a_body(resolver: APIGatewayRestResolver, event: dict[str, Any]) -> bool:
    """A POST to a path routed for POST: the requests whose body the routes read.

    A POST elsewhere is answered 404 or 405 by the resolver, before any body matters.
    """
    path = event.get("path")
    return (
        str(event.get("httpMethod", "")).upper() == "POST"
        and isinstance(path, str)
        and "POST" in allowed_methods(resolver, path)
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
