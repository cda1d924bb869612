"""botocore's Lambda client, as far as the memory client uses it, over the handler in-process."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

from local.proxy_events import LambdaContextStandIn

FUNCTION = "converse-history:live"
UNHANDLED = "unhandled"
"""An invocation whose function failed unhandled: `FunctionError` and an error payload."""


@dataclass
class FakeLambda:
    """botocore's Lambda client, as far as the client uses it, over the handler in-process.

    `before` holds failures raised instead of invoking (one per invocation, in
    order); `after` holds failures raised once the handler has answered, its
    work committed.
    """

    handler: Any
    before: list[Exception | str] = field(default_factory=list)
    after: list[Exception] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, *, FunctionName: str, Payload: bytes) -> dict[str, Any]:
        assert FunctionName == FUNCTION
        event = json.loads(Payload)
        self.events.append(event)
        if self.before:
            failure = self.before.pop(0)
            if failure == UNHANDLED:
                crash = {"errorMessage": "boom", "errorType": "RuntimeError"}
                return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": _stream(crash)}
            assert isinstance(failure, Exception)
            raise failure
        answer = self.handler.lambda_handler(event, LambdaContextStandIn())
        if self.after:
            raise self.after.pop(0)
        return {"StatusCode": 200, "Payload": _stream(answer)}


def _stream(document: Any) -> io.BytesIO:
    return io.BytesIO(json.dumps(document).encode())
