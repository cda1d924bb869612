"""The API's request and response bodies (SPEC 7), validated at the edge.

Every limit that protects the store sits here, so a bad request is refused
with the field named before anything is read or written. The text's size is
not limited here: a message over the store's item limit is answered 413.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    Tag,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.config import JsonDict

from memory_core.usage import MAX_TOKENS, TokenUsage

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


# -- blank text ----------------------------------------------------------------------
#
# Bedrock Converse refuses a blank text block, and a reader sees nothing in one, so a
# text must hold at least one character that is not blank. Blank is what no reader
# sees: white space, controls and format characters (U+200B ZERO WIDTH SPACE, the
# joiners, U+2060 WORD JOINER, U+FEFF, bidi marks, soft hyphen, tag characters), and
# the few other characters Unicode lists as default-ignorable (variation selectors,
# Hangul fillers, the combining grapheme joiner) plus U+2800 BRAILLE PATTERN BLANK,
# the favourite stand-in for "invisible text". A joiner between visible characters
# (an emoji ZWJ sequence, a Persian ZWNJ) is fine: the visible characters count.

_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
"""Controls, format characters, and space, line and paragraph separators."""

_SIGNS_THAT_ARE_FORMAT_CHARACTERS = frozenset(
    "\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd"
)
"""Unicode's prepended concatenation marks (Cf): each draws a sign (U+06DD END OF AYAH)."""

_BLANK_OUTSIDE_THOSE_CATEGORIES = frozenset(
    "\u034f"  # COMBINING GRAPHEME JOINER
    "\u115f\u1160\u3164\uffa0"  # the Hangul fillers
    "\u17b4\u17b5"  # Khmer inherent vowels, invisible
    "\u180b\u180c\u180d\u180f"  # Mongolian free variation selectors
    "\u2800"  # BRAILLE PATTERN BLANK
    + "".join(map(chr, range(0xFE00, 0xFE10)))  # variation selectors
    + "".join(map(chr, range(0xE0100, 0xE01F0)))  # variation selectors supplement
)


def is_blank_character(character: str) -> bool:
    """Whether a reader sees nothing of `character` on its own (white space included)."""
    if character in _BLANK_OUTSIDE_THOSE_CATEGORIES:
        return True
    return (
        unicodedata.category(character) in _BLANK_CATEGORIES
        and character not in _SIGNS_THAT_ARE_FORMAT_CHARACTERS
    )


def is_blank(text: str) -> bool:
    """Whether `text` holds no character a reader would see (the empty text included)."""
    return all(map(is_blank_character, text))


def _visible_text(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    if is_blank(text):
        seen = list(dict.fromkeys(text))
        shown = ", ".join(f"U+{ord(c):04X}" for c in seen[:4]) + (", ..." if seen[4:] else "")
        raise ValueError(
            f"must not be blank: it holds only white space and invisible characters ({shown})"
        )
    return text


@functools.cache
def not_blank_pattern() -> str:
    """The documents' `pattern` for text: a character of the Basic Multilingual Plane that
    is not blank, the ranges spelled out (`\\uXXXX`, as every regex dialect reads them).

    Blank characters beyond it (tag characters, the supplementary variation selectors)
    cannot be written in a JSON Schema regex without the `u` flag: the documents let a
    text made only of those through, the service refuses it. Built on the first OpenAPI
    document, not at import: it looks at all 65,536 characters.
    """
    blank = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF and is_blank_character(chr(c))]
    ranges: list[tuple[int, int]] = []
    for code in blank:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    spelled = "".join(
        f"\\u{start:04x}" if start == end else f"\\u{start:04x}-\\u{end:04x}"
        for start, end in ranges
    )
    return f"[^{spelled}]"


def _text_schema(schema: JsonDict) -> None:
    schema.update(minLength=1, pattern=not_blank_pattern())


VisibleText = Annotated[str, AfterValidator(_unicode_text), AfterValidator(_visible_text)]
"""Text that holds at least one character a reader sees: what every text block takes."""
JsonObject = Annotated[dict[str, Any], AfterValidator(_plain_json)]
ToolJson = Annotated[dict[str, Any] | list[Any], AfterValidator(_plain_json)]


class _NonEmptyText(_Strict):
    text: VisibleText = Field(json_schema_extra=_text_schema)


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
    text: VisibleText | None = Field(None, json_schema_extra=_text_schema)
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
    """The contact's own message: text, with tool results beside it perhaps; or only the
    results of the pending tool calls, the agent's loop going on; never a tool call."""

    content: list[ContentBlock] | None = Field(
        None,
        min_length=1,
        max_length=MAX_BLOCKS,
        # Text blocks are never empty, so a message without one returns tool results only:
        # whether they answer the pending calls is the service's to check.
        json_schema_extra={"items": {"not": {"required": ["toolUse"]}}},
    )

    @model_validator(mode="after")
    def _the_contacts_own_words(self) -> UserMessageBody:
        if any("toolUse" in block for block in self.blocks()):
            raise ValueError("a contact's message cannot call a tool")
        return self


class ConverseRequest(_Strict):
    message: UserMessageBody


_ROLE_RULES: JsonDict = {
    "allOf": [
        {
            # A `user` turn recorded here only returns tool results, and no model's usage.
            "if": {"required": ["role"], "properties": {"role": {"const": "user"}}},
            "then": {
                "required": ["content"],
                "properties": {"content": {"type": "array", "items": {"required": ["toolResult"]}}},
                "not": {"required": ["usage"]},
            },
        },
        {
            "if": {"required": ["role"], "properties": {"role": {"const": "assistant"}}},
            "then": {"properties": {"content": {"items": {"not": {"required": ["toolResult"]}}}}},
        },
    ]
}


TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_TOKENS)]


class Usage(_Strict):
    """What the model reported for the reply: Bedrock Converse's `usage`, as it names it.

    Bedrock's own object can be passed as it came (its `cacheDetails` is accepted and
    not kept). Counted per tenant when the reply is first recorded, never on a replay.
    """

    input_tokens: TokenCount = Field(
        alias="inputTokens", description="prompt tokens the model processed, cache aside"
    )
    output_tokens: TokenCount = Field(alias="outputTokens")
    total_tokens: TokenCount | None = Field(None, alias="totalTokens")
    cache_read_input_tokens: TokenCount | None = Field(
        None, alias="cacheReadInputTokens", description="prompt tokens read from the cache"
    )
    cache_write_input_tokens: TokenCount | None = Field(
        None, alias="cacheWriteInputTokens", description="prompt tokens written to the cache"
    )
    cache_details: list[Any] | None = Field(
        None, alias="cacheDetails", description="Bedrock's breakdown of cache writes; not kept"
    )

    def token_usage(self) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens,
        )


class RecordTurnRequest(MessageBody):
    """An agent's reply (`assistant`), or the tool results it returns (`user`)."""

    model_config = ConfigDict(json_schema_extra={**_TEXT_OR_CONTENT, **_ROLE_RULES})

    role: Literal["assistant", "user"]
    usage: Usage | None = Field(
        None,
        description="assistant turns only: the model's token usage for this reply, "
        "for the per-tenant token metrics",
    )

    @field_validator("usage")
    @classmethod
    def _only_a_reply_reports_usage(cls, usage: Usage | None, info: ValidationInfo) -> Usage | None:
        if usage is not None and info.data.get("role") == "user":
            raise ValueError(
                "only an assistant turn carries the model's usage; "
                "a user turn returning tool results has none"
            )
        return usage

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
    converse: ConverseFragment | None = Field(
        None,
        description="a ready fragment for Bedrock Converse: the memory in `system`, then "
        "`messages` = history + current (roles alternating, tools repaired). Unless the "
        "tenant's `promptCache` is `off`, it carries cache points "
        '(`{"cachePoint": {"type": "default"}}`, with `"ttl": "1h"` for a tenant whose '
        "`promptCacheTtl` is `1h`): one after the memory in `system`, one after the "
        "history (at the end of its last message, or between its blocks and the current "
        "message's where both are merged into one `user` message); with `stable`, one "
        "more where the previous call's history ended; none where there is no "
        "memory or no history, three at most. With `off` there is no cache point at all. "
        "`history` never carries any.",
    )


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


# -- a conversation's data (SPEC 10) ------------------------------------------------------

PAGE_LIMIT_MAX = 500
PAGE_LIMIT_DEFAULT = 100


class ExportedTurn(BaseModel):
    id: str
    role: Literal["user", "assistant"]
    sent_at: str = Field(alias="sentAt")
    recorded_at: str = Field(alias="recordedAt", description="when the service received it")
    stated_sent_at: str | None = Field(
        None,
        alias="statedSentAt",
        description="the sentAt the sender gave, where it was ahead of the service's clock",
    )
    content: list[dict[str, Any]] = Field(
        description="the content blocks exactly as recorded: untrimmed, unrepaired"
    )
    usage: dict[str, int] | None = Field(
        None, description="the model's usage, where one was recorded with the reply"
    )

    @model_serializer(mode="wrap")
    def _without_what_was_not_recorded(self, handler: SerializerFunctionWrapHandler) -> Any:
        """`usage` and `statedSentAt` appear where they were recorded, never as null."""
        shown = handler(self)
        for name in ("usage", "statedSentAt", "stated_sent_at"):
            if name in shown and shown[name] is None:
                del shown[name]
        return shown


class TurnsResponse(BaseModel):
    turns: list[ExportedTurn]
    next_cursor: str | None = Field(
        alias="nextCursor", description="the next page's cursor; null on the last page"
    )


class ContactView(BaseModel):
    contact_id: str = Field(alias="contactId")
    last_message_at: str | None = Field(
        alias="lastMessageAt", description="when the contact last wrote; null if never"
    )


class ContactsResponse(BaseModel):
    contacts: list[ContactView]
    next_cursor: str | None = Field(alias="nextCursor")


class ErasedView(BaseModel):
    items: int = Field(description="items deleted by this call (the state counts one)")
    complete: bool = Field(
        description="false when the rest is being deleted asynchronously (HTTP 202); "
        "nothing recorded before erasedAt is served either way"
    )


class ErasureResponse(BaseModel):
    erased: ErasedView
    erased_at: str = Field(alias="erasedAt")


class PreviewMemoryView(MemoryView):
    version: int = Field(description="the compaction version that wrote it")


class HistoryRangeView(BaseModel):
    history_days: int = Field(alias="historyDays")
    since: str = Field(description="turns sent before this are outside the history range")


class StandingView(BaseModel):
    standing: Literal["window", "trimmed", "folded", "out_of_range", "held_by_neither"] = Field(
        description="`window`: in the history as recorded; `trimmed`: in it, cut; "
        "`folded`: held by the memory served; `out_of_range`: older than `historyDays`; "
        "`held_by_neither`: in range, yet neither in the history nor in the memory"
    )
    omitted_tokens: int | None = Field(
        None,
        alias="omittedTokens",
        description="`trimmed` only: the tokens the trim cut",
        exclude_if=lambda value: value is None,
    )


class StandingCounts(BaseModel):
    window: int
    trimmed: int
    folded: int
    out_of_range: int
    held_by_neither: int


class PreviewResponse(BaseModel):
    previewed_at: str = Field(alias="previewedAt")
    history_range: HistoryRangeView = Field(alias="historyRange")
    history: list[ConverseMessage] = Field(
        description="the history the next converse call would return"
    )
    memory: PreviewMemoryView | None
    window: WindowView
    converse: ConverseFragment = Field(
        description="the next call's fragment without its current message: the memory in "
        "`system`, the history in `messages`, with the cache points it would carry"
    )
    standings: dict[str, StandingView] = Field(
        description="every retained turn's one standing, by turn id"
    )
    counts: StandingCounts


# -- recall ----------------------------------------------------------------------------

RECALL_LIMIT_MAX = 20
RECALL_LIMIT_DEFAULT = 5
RECALL_QUERY_MAX_CHARACTERS = 2000


class RecallRequest(_Strict):
    query: VisibleText = Field(
        max_length=RECALL_QUERY_MAX_CHARACTERS,
        description="the words to look for: in any script; accents and case do not matter",
        json_schema_extra=_text_schema,
    )
    limit: StrictInt = Field(
        RECALL_LIMIT_DEFAULT,
        ge=1,
        le=RECALL_LIMIT_MAX,
        description=f"passages at most, 1 to {RECALL_LIMIT_MAX}",
    )


class RecalledPassage(BaseModel):
    turn: TurnView = Field(
        description="the turn's exact words; a long one cut around the match, with "
        "`… N tokens omitted …` where text was left out"
    )
    score: float = Field(description="BM25 relevance: higher is better")


class RecallResponse(BaseModel):
    passages: list[RecalledPassage] = Field(description="best first; empty when nothing matched")
