"""API Gateway's HTTP API event (payload format 2.0), made into what the routes expect,
then resolved.

The HTTP API passes the path percent-decoded, and a client or another caller
may pass it still encoded; Powertools routes on it as it comes. Here the
path's id segments are decoded where they were not (and a character no path
may hold, a control character, is encoded, so that the id's pattern refuses
it by name); a body over API Gateway's 10 MB, a body not sent as
`application/json` and one that is not UTF-8 JSON are refused in the API's
own error shape; and a JSON media type is spelled as Powertools matches it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import quote, unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext

from converse_history.errors import ApiError, invalid

MAX_BODY_BYTES = 10 * 1024 * 1024
"""API Gateway's payload limit (10 MB): a larger request never reaches the Lambda.

The Lambda holds to it too, before reading a body, and the local gateway
refuses on the declared size without reading one."""


def payload_too_large(size: int | None) -> ApiError:
    """The 413 for a body over MAX_BODY_BYTES; `size` in bytes, None when too long to say."""
    limit = f"the limit is {MAX_BODY_BYTES} bytes (10 MB)"
    said = f"is {size} bytes" if size is not None else "is over the limit"
    return ApiError(413, "payload_too_large", f"the request body {said}; {limit}")


def resolve(
    resolver: APIGatewayHttpResolver, event: dict[str, Any], context: LambdaContext
) -> dict[str, Any]:
    """The proxy answer: the routes' answer, or the refusal of a body they cannot read."""
    event = _with_decoded_path(event)
    if _reads_a_body(resolver, event):
        refusal = _oversized(event)
        if refusal is None:
            event, refusal = _json_text_body(event)
        if refusal is not None:
            return _proxy_answer(refusal)
    return resolver.resolve(_with_canonical_media_type(event), context)


def allowed_methods(resolver: APIGatewayHttpResolver, path: str) -> list[str]:
    """The methods the resolver routes for `path`, sorted; none for a path it does not know.

    Read from the resolver's own route table (Powertools keeps no public view of it),
    matched with the routes' own patterns, so `Allow` cannot disagree with the routing.
    """
    routes = resolver._static_routes + resolver._dynamic_routes
    return sorted({route.method.upper() for route in routes if route.rule.match(path)})


_ID_CHARACTERS = re.compile(r"[A-Za-z0-9_.:@+-]*")

_PATH_CHARACTERS = "/%:@!$&'()*+,;="
"""What a path may hold besides letters, digits and `-._~` (RFC 3986's `pchar`, `%` and `/`)."""
_NOT_IN_A_PATH = re.compile(r"[^A-Za-z0-9\-._~/%:@!$&'()*+,;=]")


def _with_decoded_path(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its path segments percent-decoded where they decode to id characters,
    and percent-encoded where they hold what no path may.

    The HTTP API decodes `rawPath` before the Lambda sees it; an event built
    elsewhere (a test, a direct caller) may keep the client's encoding, and
    Powertools reads the path parameters from the path as it is:
    `alice%40example.com` is the contact `alice@example.com`. Only a segment
    that decodes to id characters is decoded, so `a%2Fb` or `a%23b` stays as
    sent and is refused by the id pattern, with the field named, rather than
    rerouted.

    A character no URI holds as it is (a control character, a space, `"`, `\\`,
    non-ASCII: what the HTTP API's decoding of `a%01b` gives) is percent-encoded
    again: Powertools' routes would not match it (a 404 for a path that has a
    route), and encoded, the segment reaches its id's pattern and is refused
    naming `tenantId` or `contactId`.
    """
    path = event.get("rawPath")
    if not isinstance(path, str):
        return event
    routed = path
    if "%" in routed:
        routed = "/".join(_decoded(part) for part in routed.split("/"))
    if _NOT_IN_A_PATH.search(routed):
        routed = quote(routed, safe=_PATH_CHARACTERS, errors="surrogatepass")
    return {**event, "rawPath": routed} if routed != path else event


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


def _reads_a_body(resolver: APIGatewayHttpResolver, event: dict[str, Any]) -> bool:
    """A POST to a path routed for POST: the requests whose body the routes read.

    A POST elsewhere is answered 404 or 405 by the resolver, before any body matters.
    """
    path = _routed_path(event)
    method = (event.get("requestContext") or {}).get("http", {}).get("method", "")
    return (
        str(method).upper() == "POST"
        and path is not None
        and "POST" in allowed_methods(resolver, path)
    )


def _routed_path(event: dict[str, Any]) -> str | None:
    """The path the routes see: `rawPath` without the stage's name, as Powertools strips it
    (the stack's stage is `$default`, whose paths carry none)."""
    path = event.get("rawPath")
    if not isinstance(path, str):
        return None
    stage = (event.get("requestContext") or {}).get("stage", "$default")
    prefix = f"/{stage}"
    if stage != "$default" and (path == prefix or path.startswith(prefix + "/")):
        return path[len(prefix) :] or "/"
    return path


def _oversized(event: dict[str, Any]) -> ApiError | None:
    """The 413 for a body over MAX_BODY_BYTES, by its Content-Length or by what arrived.

    API Gateway refuses such a request before any Lambda runs; this holds the
    Lambda to the same limit whatever sends it the event, before the body is
    decoded or parsed.
    """
    declared = _header(event, "content-length").strip()
    if declared.isdigit() and declared.isascii():
        digits = declared.lstrip("0") or "0"
        if len(digits) > len(str(MAX_BODY_BYTES)) or int(digits) > MAX_BODY_BYTES:
            return payload_too_large(int(digits) if len(digits) <= 19 else None)
    size = _body_size(event)
    return payload_too_large(size) if size > MAX_BODY_BYTES else None


def _body_size(event: dict[str, Any]) -> int:
    """The body's size in bytes as sent, without decoding it (base64 is 4 characters to 3)."""
    body = event.get("body")
    if not isinstance(body, str):
        return 0
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4 - body[-2:].count("=")
    if body.isascii():
        return len(body)
    return len(body.encode("utf-8", errors="surrogatepass"))


def _header(event: dict[str, Any], name: str) -> str:
    """A request header's value (names are case-insensitive); empty when it has none."""
    headers = event.get("headers") or {}
    return next((v for k, v in headers.items() if k.lower() == name and isinstance(v, str)), "")


_UTF_8 = frozenset({"utf-8", "utf8"})


def _json_text_body(event: dict[str, Any]) -> tuple[dict[str, Any], ApiError | None]:
    """The event with its body as UTF-8 JSON text, or the refusal of a body that is not.

    A body that is not JSON gets 415 (not Powertools' form parsing or its own 415
    shape), and so does one sent without a Content-Type: the API takes only
    `application/json`, and a body of no declared type is not one (API Gateway's
    Lambda proxy passes it on, untyped). A `charset` other than UTF-8 gets 400. A
    body passed base64-encoded (the HTTP API does so for a body it takes for
    binary, and the local runner for bytes that are not UTF-8) is decoded
    strictly: bytes that are not UTF-8 get 400 and never become replacement
    characters. Powertools would decode it itself, with a UnicodeDecodeError (a
    500) on such bytes.
    """
    content_type = _header(event, "content-type")
    if _media_type(content_type) != "application/json":
        sent = repr(content_type[:100]) if content_type.strip() else "missing"
        message = f"Content-Type: {sent}; the body must be application/json"
        return event, ApiError(415, "unsupported_media_type", message)
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
