"""The converse answer as the Step Functions workflow takes it: only what its next step needs.

Every byte of a direct invocation's answer sits in the execution's state,
which holds at most 256 KiB. The API's answer carries the current message in
`current` and again in `converse`, beside the input it came in; the
workflow's carries it once, inside the model's input, and becomes the whole
state, so the incoming message is not carried alongside it either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from converse_history.api_models import Usage
from converse_history.errors import ApiError, invalid
from memory_core.turns import ContentBlock
from memory_core.usage import CONVERSE_NAMES, TokenUsage
from memory_core.workflow_input import (
    MODEL_INPUT_LIMIT_BYTES,
    ModelInput,
    current_fits,
    model_input,
)

WORKFLOW = "workflow"


def refuse_what_cannot_fit(content: Sequence[ContentBlock]) -> None:
    """A 413 before anything is recorded, for a message the workflow could never carry."""
    if not current_fits({"role": "user", "content": content}):
        raise ApiError(
            413,
            "message_too_large",
            f"message: over the {MODEL_INPUT_LIMIT_BYTES // 1024} KiB the converse workflow "
            "can carry to the model as UTF-8 JSON; send it through the API instead",
        )


def workflow_answer(
    tenant_id: str, contact_id: str, answer: dict[str, Any], current: Sequence[ContentBlock]
) -> tuple[dict[str, Any], ModelInput | None]:
    """The workflow's state after the history step, and the model input (None on escalate)."""
    state: dict[str, Any] = {
        "tenantId": tenant_id,
        "contactId": contact_id,
        "decision": answer["decision"],
        "reason": answer["reason"],
        "turnCount": answer["turnCount"],
    }
    if answer["decision"] != "model":
        return state, None
    fitted = model_input(answer["converse"], current)
    state["model"] = {"input": fitted.as_json()}
    return state, fitted


def reply_text(model_reply: Any) -> str:
    """The model's first text block, whatever comes before it (a reasoning block, say).

    `model_reply` is Converse's output as the SDK integration names it:
    `{"content": [{"Text": ...}, ...], "stopReason": ...}`. A reply with no text
    (cut at the token limit while reasoning, or filtered) is refused with the stop
    reason, so the execution fails saying why rather than recording nothing.
    """
    content = model_reply.get("content") if isinstance(model_reply, dict) else None
    if not isinstance(content, list):
        raise invalid("modelReply.content", "must be a list of blocks")
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("Text"), str) and block["Text"].strip():
            return str(block["Text"])
    raise ApiError(
        422,
        "reply_without_text",
        f"the model's reply has no text (stop reason: {model_reply.get('stopReason')!r})",
    )


_SDK_USAGE_MEMBERS = {name[:1].upper() + name[1:]: name for name in CONVERSE_NAMES}
"""Converse's `usage` members as the SDK integration names them (capitalised, as
`sdk_member_names` writes them), and as the API does."""


def reply_usage(model_reply: Any, on_unreadable: Callable[[str], None]) -> TokenUsage | None:
    """The usage Bedrock reported with the reply (`modelReply.usage`, the SDK's `Usage`).

    None when there is none: an execution started before the workflow selected it.
    Members this service does not count (`CacheDetails`, any added later) are left
    out. A usage that is not Bedrock's shape is reported to `on_unreadable` and left
    out too: the reply is what the contact waits for, and it is recorded regardless.
    """
    usage = model_reply.get("usage") if isinstance(model_reply, dict) else None
    if usage is None:
        return None
    if not isinstance(usage, dict):
        on_unreadable(f"modelReply.usage: a {type(usage).__name__}, not an object")
        return None
    named = {name: usage[member] for member, name in _SDK_USAGE_MEMBERS.items() if member in usage}
    try:
        return Usage.model_validate(named).token_usage()
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        on_unreadable(f"modelReply.usage.{where}: {first['msg']}")
        return None
