"""The API's request and response bodies (SPEC 7), validated at the edge.

Every limit that protects the store sits here, so a bad request is refused
with the field named before anything is read or written. The text's size is
not limited here: a message over the store's item limit is answered 413.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

CONTACT_ID_PATTERN = r"^[A-Za-z0-9+][A-Za-z0-9_.:@+-]{0,127}$"
MESSAGE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
TOOL_USE_ID_PATTERN = r"^[a-zA-Z0-9_.:-]{1,64}$"
"""Bedrock Converse's own `ToolUseId` (botocore's model: `[a-zA-Z0-9_.:-]+`, 1-64)."""
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
"""Bedrock Converse's own `ToolName` (botocore's model: `[a-zA-Z0-9_-]+`, 1-64)."""
TOOL_ID_DESCRIPTION = (
    "the tool call's id, as Bedrock Converse takes it: [a-zA-Z0-9_.:-], 1 to 64 characters "
    "(e.g. `tooluse_abc`, `call:abc`, `functions.get_weather:0`)"
)
TOOL_NAME_DESCRIPTION = (
    "the tool's name, as Bedrock Converse takes it: [a-zA-Z0-9_-], 1 to 64 characters"
)
MAX_BLOCKS = 50

NOT_BLANK_PATTERN = (
    "[^\\u0009-\\u000d\\u001c-\\u0020\\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000]"
)
"""A character that is not white space (Python's `str.isspace`, spelled out).

The documents' regex dialects disagree on `\\s`, so the class is explicit: a text
matches it exactly when `text.strip()` is not empty, the check the model makes.
"""

SENT_AT_PATTERN = (
    r"^(?:19[7-9][0-9]|[2-9][0-9]{3})-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
"""An RFC 3339 date-time with its offset, from 1970 on (the TTL counts epoch seconds)."""

MAX_JSON_DEPTH = 32
"""How deep a tool's input or a JSON tool result may nest (DynamoDB's own limit for maps)."""

_SENT_AT_NAIVE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9:.]+$")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_SCHEMA: JsonDict = {"minLength": 1, "pattern": NOT_BLANK_PATTERN}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unicode_text(text: str) -> str:
    """Text the store and the answers can carry: no unpaired UTF-16 surrogate (`\\ud800`)."""
    surrogate = _SURROGATE.search(text)
    if surrogate:
        raise ValueError(
            f"holds an unpaired surrogate (U+{ord(surrogate.group()):04X}) at "
            f"position {surrogate.start()}; send valid Unicode text"
        )
    return text


def _plain_json(value: Any) -> Any:
    """A tool's JSON, as the store, the window and Bedrock can carry it back."""
    problem = _json_problem(value, "", 1)
    if problem:
        raise ValueError(problem)
    return value


def _json_problem(value: Any, where: str, depth: int) -> str | None:
    if isinstance(value, dict | list) and depth > MAX_JSON_DEPTH:
        return f"nests deeper than {MAX_JSON_DEPTH} levels (at {where})"
    if isinstance(value, str):
        return _text_problem(value, where)
    if isinstance(value, float) and not math.isfinite(value):
        return f"holds {value!r} at {where or 'the top'}; JSON numbers are finite"
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{where}[{key!r}]"
            problem = _text_problem(key, f"the key of {inner}") or _json_problem(
                item, inner, depth + 1
            )
            if problem:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problem = _json_problem(item, f"{where}[{index}]", depth + 1)
            if problem:
                return problem
    return None


def _text_problem(text: str, where: str) -> str | None:
    try:
        _unicode_text(text)
    except ValueError as error:
        return f"{where or 'the value'} {error}"
    return None


Text = Annotated[str, AfterValidator(_unicode_text)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_plain_json)]
ToolJson = Annotated[dict[str, Any] | list[Any], AfterValidator(_plain_json)]


class _NonEmptyText(_Strict):
    text: Text = Field(json_schema_extra=_TEXT_SCHEMA)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("must not be empty")
        return text


class TextBlock(_NonEmptyText):
    pass


class ToolUse(_Strict):
    tool_use_id: str = Field(
        alias="toolUseId", pattern=TOOL_USE_ID_PATTERN, description=TOOL_ID_DESCRIPTION
    )
    name: str = Field(pattern=TOOL_NAME_PATTERN, description=TOOL_NAME_DESCRIPTION)
    input: JsonObject = Field(
        description=f"the tool's input, nested at most {MAX_JSON_DEPTH} levels"
    )


class ToolUseBlock(_Strict):
    tool_use: ToolUse = Field(alias="toolUse")


class ToolResultText(_NonEmptyText):
    pass


class ToolResultJson(_Strict):
    json_: ToolJson = Field(
        alias="json", description=f"a JSON result, nested at most {MAX_JSON_DEPTH} levels"
    )


def _kind_by_key(*kinds: tuple[str, type[BaseModel]]) -> Any:
    """Which model a block is, told by the key it carries, so an error names that model's field.

    A plain union would report every member's complaint, the first one usually
    about a member the block never meant to be ("TextBlock.text: Field required").
    """

    def kind(value: Any) -> str | None:
        if isinstance(value, BaseModel):
            return type(value).__name__
        if isinstance(value, dict):
            return next((model.__name__ for key, model in kinds if key in value), None)
        return None

    return kind


ToolResultItem = Annotated[
    Annotated[ToolResultText, Tag("ToolResultText")]
    | Annotated[ToolResultJson, Tag("ToolResultJson")],
    Discriminator(
        _kind_by_key(("text", ToolResultText), ("json", ToolResultJson)),
        custom_error_type="tool_result_item",
        custom_error_message='a tool result item is {"text": ...} or {"json": ...}',
    ),
]


class ToolResult(_Strict):
    tool_use_id: str = Field(
        alias="toolUseId", pattern=TOOL_USE_ID_PATTERN, description=TOOL_ID_DESCRIPTION
    )
    content: list[ToolResultItem] = Field(min_length=1, max_length=MAX_BLOCKS)
    status: Literal["success", "error"] | None = None


class ToolResultBlock(_Strict):
    tool_result: ToolResult = Field(alias="toolResult")


ContentBlock = Annotated[
    Annotated[TextBlock, Tag("TextBlock")]
    | Annotated[ToolUseBlock, Tag("ToolUseBlock")]
    | Annotated[ToolResultBlock, Tag("ToolResultBlock")],
    Discriminator(
        _kind_by_key(
            ("text", TextBlock), ("toolUse", ToolUseBlock), ("toolResult", ToolResultBlock)
        ),
        custom_error_type="content_block",
        custom_error_message=(
            'a content block is {"text": ...}, {"toolUse": ...} or {"toolResult": ...}'
        ),
    ),
]


_TEXT_OR_CONTENT: JsonDict = {
    # Exactly one of the two carries the message (null stands for absent).
    "oneOf": [
        {"required": ["text"], "properties": {"text": {"type": "string"}}},
        {"required": ["content"], "properties": {"content": {"type": "array"}}},
    ]
}


class MessageBody(_Strict):
    """A message: `text`, or Converse `content` blocks; an id and a `sentAt`, both optional."""

    model_config = ConfigDict(json_schema_extra=_TEXT_OR_CONTENT)

    id: str | None = Field(None, pattern=MESSAGE_ID_PATTERN)
    text: Text | None = Field(None, json_schema_extra=_TEXT_SCHEMA)
    content: list[ContentBlock] | None = Field(None, min_length=1, max_length=MAX_BLOCKS)
    sent_at: datetime | None = Field(
        None,
        alias="sentAt",
        description="RFC 3339 with its offset, from 1970 on; when absent, the service's clock",
        json_schema_extra={"pattern": SENT_AT_PATTERN},
    )

    @model_validator(mode="after")
    def _text_or_content(self) -> MessageBody:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of text and content")
        if self.text is not None and not self.text.strip():
            raise ValueError("text must not be empty")
        return self

    @field_validator("sent_at", mode="before")
    @classmethod
    def _an_rfc_3339_instant(cls, sent_at: Any) -> Any:
        # pydantic alone would also take epoch numbers, "1700000000", a space for the
        # T, a missing seconds field: none of them is the documented date-time.
        if sent_at is None:
            return None
        if isinstance(sent_at, str) and _SENT_AT_NAIVE.match(sent_at):
            raise ValueError("must carry a timezone, e.g. 2026-11-02T10:00:00Z")
        if not isinstance(sent_at, str) or not re.match(SENT_AT_PATTERN, sent_at):
            raise ValueError(
                "must be an RFC 3339 date-time with its offset, from 1970 on, "
                "e.g. 2026-11-02T10:00:00Z"
            )
        return sent_at

    @field_validator("sent_at")
    @classmethod
    def _with_a_timezone(cls, sent_at: datetime | None) -> datetime | None:
        if sent_at is None:
            return None
        if sent_at.utcoffset() is None:
            raise ValueError("must carry a timezone, e.g. 2026-11-02T10:00:00Z")
        try:
            sent_at.astimezone(UTC)
        except OverflowError:
            raise ValueError("is out of range once taken to UTC") from None
        return sent_at

    def blocks(self) -> list[dict[str, Any]]:
        if self.text is not None:
            return [{"text": self.text}]
        assert self.content is not None
        return [block.model_dump(by_alias=True, exclude_none=True) for block in self.content]


class UserMessageBody(MessageBody):
    """The contact's own message: text, with tool results beside it perhaps, never a tool call."""

    content: list[ContentBlock] | None = Field(
        None,
        min_length=1,
        max_length=MAX_BLOCKS,
        json_schema_extra={
            "contains": {"required": ["text"]},
            "items": {"not": {"required": ["toolUse"]}},
        },
    )

    @model_validator(mode="after")
    def _the_contacts_own_words(self) -> UserMessageBody:
        blocks = self.blocks()
        if not any(block.get("text") for block in blocks):
            raise ValueError("the contact's message must carry text")
        if any("toolUse" in block for block in blocks):
            raise ValueError("a contact's message cannot call a tool")
        return self


class ConverseRequest(_Strict):
    message: UserMessageBody


_ROLE_RULES: JsonDict = {
    "allOf": [
        {
            # A `user` turn recorded here only returns tool results.
            "if": {"required": ["role"], "properties": {"role": {"const": "user"}}},
            "then": {
                "required": ["content"],
                "properties": {"content": {"type": "array", "items": {"required": ["toolResult"]}}},
            },
        },
        {
            "if": {"required": ["role"], "properties": {"role": {"const": "assistant"}}},
            "then": {"properties": {"content": {"items": {"not": {"required": ["toolResult"]}}}}},
        },
    ]
}


class RecordTurnRequest(MessageBody):
    """An agent's reply (`assistant`), or the tool results it returns (`user`)."""

    model_config = ConfigDict(json_schema_extra={**_TEXT_OR_CONTENT, **_ROLE_RULES})

    role: Literal["assistant", "user"]

    @model_validator(mode="after")
    def _user_turns_only_return_tool_results(self) -> RecordTurnRequest:
        blocks = self.blocks()
        if self.role == "user" and not all("toolResult" in block for block in blocks):
            raise ValueError(
                "a user turn recorded here may only return tool results; "
                "the contact's own messages go to /converse"
            )
        if self.role == "assistant" and any("toolResult" in block for block in blocks):
            raise ValueError("an assistant turn cannot return tool results")
        return self


# -- responses -----------------------------------------------------------------------


class ConverseMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: list[dict[str, Any]]


class MemoryView(BaseModel):
    summary: str
    covers_from: str = Field(alias="coversFrom")
    covers_until: str = Field(alias="coversUntil")
    turns_folded: int = Field(alias="turnsFolded")


class WindowView(BaseModel):
    kept: int = Field(description="stored turns in the history")
    dropped: int = Field(description="candidate turns left out of the history")
    trimmed: int = Field(description="history messages cut to their head and tail")
    repaired: int = Field(
        description="repairs that make `converse` valid for Bedrock (SPEC 5.5.9): a synthetic "
        "error toolResult for a call whose result was never recorded, a toolResult that "
        "answers no call left out, tool results moved before text; each one is logged"
    )
    estimated_tokens: int = Field(alias="estimatedTokens")


class ConverseFragment(BaseModel):
    system: list[dict[str, Any]]
    messages: list[ConverseMessage]


class ConverseResponse(BaseModel):
    decision: Literal["model", "escalate"]
    reason: Literal["turn_cap"] | None
    turn_count: int = Field(alias="turnCount")
    current: ConverseMessage
    history: list[ConverseMessage] | None = None
    memory: MemoryView | None = None
    window: WindowView | None = None
    converse: ConverseFragment | None = None


class TurnView(BaseModel):
    id: str
    role: Literal["user", "assistant"]
    sent_at: str = Field(alias="sentAt")
    content: list[dict[str, Any]]


class RecordTurnResponse(BaseModel):
    turn: TurnView


class CountersView(BaseModel):
    turn_count: int = Field(alias="turnCount")
    unfolded_tokens: int = Field(alias="unfoldedTokens")
    unfolded_turns: int = Field(alias="unfoldedTurns")
    turns_recorded: int = Field(alias="turnsRecorded")
    late_turns: int = Field(
        alias="lateTurns",
        description="Turns recorded after compaction had passed their sentAt; the next "
        "compaction folds them (they are counted in unfoldedTurns too).",
    )
    compaction_in_flight: bool = Field(alias="compactionInFlight")


class MemoryResponse(BaseModel):
    memory: MemoryView | None
    counters: CountersView


class ErrorDetail(BaseModel):
    code: str
    message: str
    retryAfterSeconds: int | None = Field(
        default=None, description="rate_limited only: seconds until the contact may send again"
    )


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthResponse(BaseModel):
    status: Literal["ok"]
