"""HTTP requests as API Gateway REST proxy events, and the handlers' answers back.

The local runner and the tests speak to the Lambda's own `lambda_handler`
through these events, so no route is implemented twice.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from converse_history.api_models import BINARY_MEDIA_TYPES


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
    """A REST proxy event; a `bytes` body as API Gateway passes it (`event_body`).

    A request whose `headers` name no Content-Type gets `default_content_type`
    (the tests' requests are JSON unless they say otherwise); the local gateway
    passes None, so a client that sent none reaches the handler without one.
    """
    split = urlsplit(target)
    # API Gateway passes `?limit=` on as an empty value, which the handler refuses 400.
    multi_query = parse_qs(split.query, keep_blank_values=True)
    query = {k: v[-1] for k, v in multi_query.items()}
    request_id = str(uuid.uuid4())
    all_headers = dict(headers or {})
    content_types = [v for k, v in all_headers.items() if k.lower() == "content-type"]
    if not content_types and default_content_type is not None:
        all_headers = {"Content-Type": default_content_type, **all_headers}
        content_types = [default_content_type]
    content_type = content_types[-1] if content_types else ""
    text, is_base64 = event_body(body, content_type) if isinstance(body, bytes) else (body, False)
    return {
        "resource": split.path,
        "path": split.path,
        "httpMethod": method.upper(),
        "headers": all_headers,
        "multiValueHeaders": {k: [v] for k, v in all_headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": split.path,
            "httpMethod": method.upper(),
            "path": split.path,
            "stage": "local",
            "requestId": request_id,
            "accountId": "123456789012",
            "identity": {"userArn": caller_arn, "caller": caller_arn, "sourceIp": "127.0.0.1"},
        },
        "body": text or None,
        "isBase64Encoded": is_base64,
    }


def event_body(body: bytes, content_type: str) -> tuple[str, bool]:
    """The body as the event carries it, and whether it is base64-encoded.

    A body of a binary media type (`application/json`: BINARY_MEDIA_TYPES, the
    API's `binaryMediaTypes` in AWS) is passed base64-encoded, its bytes as sent,
    for the handler to decode strictly. So is any body that is not UTF-8, whatever
    its type: decoded as text here, its bytes would have become U+FFFD, the
    replacement character, and been stored so.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in BINARY_MEDIA_TYPES:
        try:
            return body.decode("utf-8"), False
        except UnicodeDecodeError:
            pass
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
