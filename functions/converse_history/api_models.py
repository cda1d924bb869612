"""The API's request and response bodies (SPEC 7), validated at the edge.

Every limit that protects the store sits here, so a bad request is refused
with the field named before anything is read or written. The text's size is
not limited here: a message over the store's item limit is answered 413.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memory_core.rules import TENANT_ID_PATTERN

CONTACT_ID_PATTERN = r"^[A-Za-z0-9+][A-Za-z0-9_.:@+-]{0,127}$"
MESSAGE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
TOOL_USE_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
MAX_BLOCKS = 50

TenantIdParam = Annotated[str, Field(pattern=TENANT_ID_PATTERN)]
ContactIdParam = Annotated[str, Field(pattern=CONTACT_ID_PATTERN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _NonEmptyText(_Strict):
    text: str

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("must not be empty")
        return text


class TextBlock(_NonEmptyText):
    pass


class ToolUse(_Strict):
    tool_use_id: str = Field(alias="toolUseId", pattern=TOOL_USE_ID_PATTERN)
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    input: dict[str, Any]


class ToolUseBlock(_Strict):
    tool_use: ToolUse = Field(alias="toolUse")


class ToolResultText(_NonEmptyText):
    pass


class ToolResultJson(_Strict):
    json_: dict[str, Any] | list[Any] = Field(alias="json")


class ToolResult(_Strict):
    tool_use_id: str = Field(alias="toolUseId", pattern=TOOL_USE_ID_PATTERN)
    content: list[ToolResultText | ToolResultJson] = Field(min_length=1, max_length=MAX_BLOCKS)
    status: Literal["success", "error"] | None = None


class ToolResultBlock(_Strict):
    tool_result: ToolResult = Field(alias="toolResult")


ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock


class MessageBody(_Strict):
    """A message: `text`, or Converse `content` blocks; an id and a `sentAt`, both optional."""

    id: str | None = Field(None, pattern=MESSAGE_ID_PATTERN)
    text: str | None = None
    content: list[ContentBlock] | None = Field(None, min_length=1, max_length=MAX_BLOCKS)
    sent_at: datetime | None = Field(None, alias="sentAt")

    @model_validator(mode="after")
    def _text_or_content(self) -> MessageBody:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of text and content")
        if self.text is not None and not self.text.strip():
            raise ValueError("text must not be empty")
        return self

    @field_validator("sent_at")
    @classmethod
    def _with_a_timezone(cls, sent_at: datetime | None) -> datetime | None:
        if sent_at is not None and sent_at.utcoffset() is None:
            raise ValueError("must carry a timezone, e.g. 2026-11-02T10:00:00Z")
        return sent_at

    def blocks(self) -> list[dict[str, Any]]:
        if self.text is not None:
            return [{"text": self.text}]
        assert self.content is not None
        return [block.model_dump(by_alias=True, exclude_none=True) for block in self.content]


class UserMessageBody(MessageBody):
    @model_validator(mode="after")
    def _the_contacts_own_words(self) -> UserMessageBody:
        if not any(block.get("text") for block in self.blocks()):
            raise ValueError("the contact's message must carry text")
        if any("toolUse" in block for block in self.blocks()):
            raise ValueError("a contact's message cannot call a tool")
        return self


class ConverseRequest(_Strict):
    message: UserMessageBody


class RecordTurnRequest(MessageBody):
    """An agent's reply (`assistant`), or the tool results it returns (`user`)."""

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
    kept: int
    dropped: int
    trimmed: int
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
    compaction_in_flight: bool = Field(alias="compactionInFlight")


class MemoryResponse(BaseModel):
    memory: MemoryView | None
    counters: CountersView


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthResponse(BaseModel):
    status: Literal["ok"]
