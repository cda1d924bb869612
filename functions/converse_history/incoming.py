"""A request's message, as the service takes it: shared by the HTTP routes and the direct path."""

from __future__ import annotations

from converse_history.api_models import MessageBody, RecordTurnRequest
from converse_history.service import Incoming
from memory_core.usage import TokenUsage


def incoming(body: MessageBody, role: str) -> Incoming:
    return Incoming(id=body.id, role=role, content=body.blocks(), sent_at=body.sent_at)  # type: ignore[arg-type]


def reported_usage(body: RecordTurnRequest) -> TokenUsage | None:
    return body.usage.token_usage() if body.usage is not None else None
