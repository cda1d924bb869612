"""HTTP requests as API Gateway HTTP API events (payload format 2.0), and the handlers'
answers back.

The local runner and the tests speak to the Lambda's own `lambda_handler`
through these events, so no route is implemented twice.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True, slots=True)
class LambdaContextStandIn:
    """What Powertools reads from a Lambda context."""

    function_name: str = "converse-history-local"
    function_version: str = "$LATEST"
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:converse-history-local"
    )
    memory_limit_in_mb: int = 512
    aws_request_id: str = "local"
    log_group_name: str = "/aws/lambda/converse-history-local"
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def proxy_event(
    method: str,
    target: str,
    body: bytes | str | None = None,
    headers: dict[str, str] | None = None,
    caller_arn: str | None = None,
    *,
    default_content_type: str | None = "application/json",
) -> dict[str, Any]:
    """An HTTP API event on the `$default` stage; a `bytes` body as API Gateway passes it
    (`event_body`), `caller_arn` as its IAM authorisation names the signed principal.

    A request whose `headers` name no Content-Type gets `default_content_type`
    (the tests' requests are JSON unless they say otherwise); the local gateway
    passes None, so a client that sent none reaches the handler without one.
    As in payload 2.0, header names are lower case, a header or query parameter
    given twice is one value joined with commas, and cookies have their own list.
    The path is passed as the client encoded it (the HTTP API decodes it first;
    the handler reads both alike).
    """
    split = urlsplit(target)
    # API Gateway passes `?limit=` on as an empty value, which the handler refuses 400.
    multi_query = parse_qs(split.query, keep_blank_values=True)
    request_id = str(uuid.uuid4())
    all_headers: dict[str, str] = {}
    for name, value in (headers or {}).items():
        key = name.lower()
        all_headers[key] = f"{all_headers[key]},{value}" if key in all_headers else value
    if "content-type" not in all_headers and default_content_type is not None:
        all_headers["content-type"] = default_content_type
    cookies = [c.strip() for c in all_headers.pop("cookie", "").split(";") if c.strip()]
    text, is_base64 = event_body(body) if isinstance(body, bytes) else (body, False)
    now = time.time()
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": "localhost",
        "domainPrefix": "localhost",
        "http": {
            "method": method.upper(),
            "path": split.path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
            "userAgent": all_headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": "$default",
        "stage": "$default",
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }
    if caller_arn is not None:
        request_context["authorizer"] = {"iam": {"userArn": caller_arn}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": all_headers,
        "queryStringParameters": {k: ",".join(v) for k, v in multi_query.items()} or None,
        "requestContext": request_context,
        "isBase64Encoded": is_base64,
    }
    if cookies:
        event["cookies"] = cookies
    if text:
        event["body"] = text
    return event


def event_body(body: bytes) -> tuple[str, bool]:
    """The body as the event carries it, and whether it is base64-encoded.

    UTF-8 text is passed as text, as the HTTP API passes a JSON body. Bytes
    that are not UTF-8 are passed base64-encoded, as sent, for the handler to
    decode strictly: decoded as text here, they would have become U+FFFD, the
    replacement character, and been stored so. The handler refuses a body of
    another type than JSON whichever way it arrives.
    """
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), True


def invoke(handler: Any, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """Call the handler; the status, the headers and the decoded JSON body."""
    answer = handler(
        event, LambdaContextStandIn(aws_request_id=event["requestContext"]["requestId"])
    )
    raw = answer.get("body") or ""
    try:
        decoded = json.loads(raw) if raw else None
    except ValueError:
        decoded = raw
    return int(answer["statusCode"]), dict(answer.get("headers") or {}), decoded
