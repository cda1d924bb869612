"""The direct invocation protocol: the Step Functions workflow calls the Lambda, not the API.

An event with an `action` (`converse`, `record`, `memory`, `window`, `recall`, and
for a conversation's data `turns`, `contacts` and `erase`) names the tenant and the
contact itself (`contacts`: the tenant only) and carries the message, the recall's
`query` and `limit`, or the page's `limit` and `cursor`, as the API's body or query
would. No caller
identity is checked: only principals allowed to invoke the function reach it.
A refusal is answered as the API's error body with its `statusCode`, so the
workflow can route on it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.conversation_store import ConversationKey
from converse_history.access import Caller
from converse_history.api_models import (
    CONTACT_ID_PATTERN,
    MESSAGE_ID_PATTERN,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_MAX,
    ConverseRequest,
    RecallRequest,
    RecordTurnRequest,
)
from converse_history.errors import ApiError, invalid, invalid_request, not_found
from converse_history.http_routes import DataRoutes
from converse_history.incoming import incoming, reported_usage
from converse_history.service import ConverseService, Incoming
from converse_history.telemetry import PowertoolsTelemetry
from converse_history.workflow_answer import (
    WORKFLOW,
    refuse_what_cannot_fit,
    reply_text,
    reply_usage,
    workflow_answer,
)
from memory_core.rules import TENANT_ID_PATTERN

ACTION = "action"
ACTIONS = ("converse", "record", "memory", "window", "recall", "turns", "contacts", "erase")
"""The key that marks an event as a direct invocation rather than an API Gateway request."""
_PROTOCOL_KEYS = {ACTION, "tenantId", "contactId"}
_INVOKER = Caller(arn=None, identity_required=False)
"""Whoever may invoke the function: its resource policy and IAM decided that already."""


class DirectInvocation:
    def __init__(
        self, service: ConverseService, data: DataRoutes, telemetry: PowertoolsTelemetry
    ) -> None:
        self._service = service
        self._data = data
        self._telemetry = telemetry

    def answer(  # noqa: PLR0911 (one return per action)
        self, event: dict[str, Any]
    ) -> dict[str, Any]:
        action = event.get(ACTION)
        try:
            if action == "contacts":
                page = PageRequest.model_validate(_page_fields(event))
                return self._data.contacts.page(
                    _tenant_id(event), _INVOKER, limit=page.limit, cursor=page.cursor
                )
            tenant_id, contact_id = _ids(event)
            if action == "converse":
                request = ConverseRequest.model_validate({"message": event.get("message")})
                message = incoming(request.message, "user")
                if event.get("for") != WORKFLOW:
                    return self._service.converse(tenant_id, contact_id, message, _INVOKER)
                return self._for_the_workflow(tenant_id, contact_id, message, event)
            if action == "record":
                return self._record(tenant_id, contact_id, event)
            if action == "memory":
                return self._memory(tenant_id, contact_id)
            if action == "window":
                return self._data.preview.preview(tenant_id, contact_id, _INVOKER)
            if action == "recall":
                asked = RecallRequest.model_validate(_page_fields(event))
                return self._data.recall.recall(
                    tenant_id, contact_id, _INVOKER, query=asked.query, limit=asked.limit
                )
            if action == "turns":
                page = PageRequest.model_validate(_page_fields(event))
                return self._data.export.page(
                    tenant_id, contact_id, _INVOKER, limit=page.limit, cursor=page.cursor
                )
            if action == "erase":
                erasure = self._data.erasure.erase(tenant_id, contact_id, _INVOKER)
                return {**erasure.as_json(), "statusCode": erasure.status}
            raise invalid(ACTION, f"must be one of {', '.join(map(repr, ACTIONS))}")
        except ValidationError as error:
            api_error = invalid_request(error.errors())
            return {**api_error.body(), "statusCode": api_error.status}
        except ApiError as error:
            return {**error.body(), "statusCode": error.status}

    def _record(self, tenant_id: str, contact_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """A reply: as the API's body, or as the model's Converse answer (`modelReply`)."""
        fields = {k: v for k, v in event.items() if k not in _PROTOCOL_KEYS}
        model_usage = None
        if "modelReply" in fields:
            model_reply = fields.pop("modelReply")
            fields["text"] = reply_text(model_reply)
            key = ConversationKey(tenant_id, contact_id)
            model_usage = reply_usage(
                model_reply,
                on_unreadable=functools.partial(self._telemetry.usage_unreadable, key),
            )
        body = RecordTurnRequest.model_validate(fields)
        usage = reported_usage(body) or model_usage
        reply = incoming(body, body.role)
        return self._service.record(tenant_id, contact_id, reply, _INVOKER, usage=usage)

    def _memory(self, tenant_id: str, contact_id: str) -> dict[str, Any]:
        """The fold and the counters, as `GET .../memory` answers them (404 when none)."""
        answer = self._service.memory(tenant_id, contact_id, _INVOKER)
        if answer is None:
            raise not_found(f"nothing recorded for contact {contact_id!r}")
        return answer

    def _for_the_workflow(
        self, tenant_id: str, contact_id: str, message: Incoming, event: dict[str, Any]
    ) -> dict[str, Any]:
        """The converse for the Step Functions workflow: its state, sized for Step Functions.

        The workflow draws `defaultMessageId` once, before the task, so a retry after
        the commit replays the message instead of recording it again.
        """
        default_id = event.get("defaultMessageId")
        if message.id is None and default_id is not None:
            if not isinstance(default_id, str) or not re.fullmatch(MESSAGE_ID_PATTERN, default_id):
                raise invalid("defaultMessageId", f"must match {MESSAGE_ID_PATTERN}")
            message = dataclasses.replace(message, id=default_id)
        refuse_what_cannot_fit(message.content)
        answer = self._service.converse(tenant_id, contact_id, message, _INVOKER)
        state, fitted = workflow_answer(tenant_id, contact_id, answer, message.content)
        if fitted is not None and (fitted.omitted_messages or fitted.memory_omitted):
            self._telemetry.workflow_input_shortened(
                ConversationKey(tenant_id, contact_id),
                fitted.omitted_messages,
                fitted.memory_omitted,
            )
        return state


class PageRequest(BaseModel):
    """A data listing's page: as the HTTP routes' query parameters, typed as JSON."""

    model_config = ConfigDict(extra="forbid", strict=True)

    limit: int = Field(PAGE_LIMIT_DEFAULT, ge=1, le=PAGE_LIMIT_MAX)
    cursor: str | None = Field(None, min_length=1, max_length=1024)


def _page_fields(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in _PROTOCOL_KEYS}


def _tenant_id(event: dict[str, Any]) -> str:
    tenant_id = event.get("tenantId")
    if not isinstance(tenant_id, str) or not re.fullmatch(TENANT_ID_PATTERN, tenant_id):
        raise invalid("tenantId", f"must match {TENANT_ID_PATTERN}")
    return tenant_id


def _ids(event: dict[str, Any]) -> tuple[str, str]:
    tenant_id, contact_id = _tenant_id(event), event.get("contactId")
    if not isinstance(contact_id, str) or not re.fullmatch(CONTACT_ID_PATTERN, contact_id):
        raise invalid("contactId", f"must match {CONTACT_ID_PATTERN}")
    return tenant_id, contact_id
