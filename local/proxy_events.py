"""HTTP requests as API Gateway REST proxy events, and the handlers' answers back.

The local runner and the tests speak to the Lambda's own `lambda_handler`
through these events, so no route is implemented twice.
"""

from __future__ import annotations

import json
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
) -> dict[str, Any]:
    split = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(split.query).items()}
    multi_query = parse_qs(split.query)
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    request_id = str(uuid.uuid4())
    all_headers = {"Content-Type": "application/json", **(headers or {})}
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
        "isBase64Encoded": False,
    }


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
