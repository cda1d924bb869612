"""What the service answers, as typed values; each keeps the answer's JSON as `raw`.

The field names are the API's, in Python's spelling (`turnCount` is
`turn_count`). Only what an agent acts on is lifted out; the rest (the
`history` and `current` of a converse answer) stays in `raw`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Window:
    """How the history was bounded: turns kept, dropped, trimmed; repairs made for Converse."""

    kept: int
    dropped: int
    trimmed: int
    repaired: int
    estimated_tokens: int

    @classmethod
    def from_api(cls, window: dict[str, Any]) -> Window:
        """From the answer's `window` object."""
        return cls(
            kept=int(window["kept"]),
            dropped=int(window["dropped"]),
            trimmed=int(window["trimmed"]),
            repaired=int(window["repaired"]),
            estimated_tokens=int(window["estimatedTokens"]),
        )


@dataclass(frozen=True)
class Memory:
    """The fold: a summary of the older conversation and the turns it covers."""

    summary: str
    covers_from: str
    covers_until: str
    turns_folded: int

    @classmethod
    def from_api(cls, memory: dict[str, Any]) -> Memory:
        """From the answer's `memory` object."""
        return cls(
            summary=str(memory["summary"]),
            covers_from=str(memory["coversFrom"]),
            covers_until=str(memory["coversUntil"]),
            turns_folded=int(memory["turnsFolded"]),
        )


@dataclass(frozen=True)
class ConverseResult:
    """The answer to a contact's message: run the model (`converse`), or escalate.

    `converse` is the API's fragment as it came, `{"system": [...], "messages": [...]}`,
    ready for `bedrock_runtime.converse(modelId=..., **result.converse)`; it may be
    absent on `escalate`. `message_id` is the id the message was recorded under
    (the caller's, or the one the client drew).
    """

    decision: Literal["model", "escalate"]
    reason: str | None
    turn_count: int
    message_id: str
    converse: dict[str, Any] | None
    window: Window | None
    memory: Memory | None
    raw: dict[str, Any]

    @property
    def escalated(self) -> bool:
        """Whether the model must not run: the message goes to a person."""
        return self.decision == "escalate"

    @classmethod
    def from_api(cls, answer: dict[str, Any], message_id: str) -> ConverseResult:
        """From the converse answer (the same JSON over HTTP and over Lambda)."""
        decision = answer["decision"]
        if decision not in ("model", "escalate"):
            raise ValueError(f"unexpected decision {decision!r} in the service's answer")
        window, memory = answer.get("window"), answer.get("memory")
        return cls(
            decision="model" if decision == "model" else "escalate",
            reason=answer.get("reason"),
            turn_count=int(answer["turnCount"]),
            message_id=message_id,
            converse=answer.get("converse"),
            window=Window.from_api(window) if window else None,
            memory=Memory.from_api(memory) if memory else None,
            raw=answer,
        )


@dataclass(frozen=True)
class RecordedTurn:
    """A turn as recorded: its id (a replay answers the first recording), role, `sentAt`
    and content blocks."""

    id: str
    role: str
    raw: dict[str, Any]
    sent_at: str = ""
    content: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_api(cls, answer: dict[str, Any]) -> RecordedTurn:
        """From the record answer, `{"turn": {...}}`; `raw` is the whole answer."""
        turn = answer["turn"]
        return cls(
            id=str(turn["id"]),
            role=str(turn["role"]),
            raw=answer,
            sent_at=str(turn.get("sentAt", "")),
            content=list(turn.get("content", [])),
        )


@dataclass(frozen=True)
class MemoryView:
    """The contact's fold (None until one is made, or once it is out of range) and counters.

    `counters` are as the API names them: `turnCount`, `unfoldedTokens`,
    `unfoldedTurns`, `turnsRecorded`, `lateTurns`, `compactionInFlight`.
    """

    memory: Memory | None
    counters: dict[str, Any]
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, answer: dict[str, Any]) -> MemoryView:
        """From the memory answer."""
        memory = answer.get("memory")
        return cls(
            memory=Memory.from_api(memory) if memory else None,
            counters=dict(answer.get("counters") or {}),
            raw=answer,
        )


@dataclass(frozen=True)
class ExportedTurn:
    """A retained turn exactly as recorded: untrimmed, unrepaired, tool blocks whole.

    `sent_at` is the turn's own time, `recorded_at` when the service stored it
    (both RFC 3339); `usage` is Bedrock's as recorded with the reply (any of
    `inputTokens`, `outputTokens`, `totalTokens`, `cacheReadInputTokens`,
    `cacheWriteInputTokens`), None when none was.
    """

    id: str
    role: str
    sent_at: str
    recorded_at: str
    content: list[dict[str, Any]]
    usage: dict[str, Any] | None
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, turn: dict[str, Any]) -> ExportedTurn:
        """From one of the `turns` of an export page; `raw` is that turn."""
        usage = turn.get("usage")
        return cls(
            id=str(turn["id"]),
            role=str(turn["role"]),
            sent_at=str(turn["sentAt"]),
            recorded_at=str(turn["recordedAt"]),
            content=list(turn["content"]),
            usage=dict(usage) if usage is not None else None,
            raw=turn,
        )


@dataclass(frozen=True)
class ContactSummary:
    """A contact of the tenant with something stored, and the time of its conversation's
    last message (RFC 3339; None when the service has none to give)."""

    contact_id: str
    last_message_at: str | None
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, contact: dict[str, Any]) -> ContactSummary:
        """From one of the `contacts` of a listing page; `raw` is that entry."""
        last_message_at = contact.get("lastMessageAt")
        return cls(
            contact_id=str(contact["contactId"]),
            last_message_at=str(last_message_at) if last_message_at is not None else None,
            raw=contact,
        )


@dataclass(frozen=True)
class Erasure:
    """What an erase removed: `items` deleted so far, and whether that is all of them.

    From `erased_at` on, nothing recorded before is served again, even when
    `complete` is False (the service deletes the rest asynchronously).
    """

    items: int
    complete: bool
    erased_at: str
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, answer: dict[str, Any], *, accepted: bool = False) -> Erasure:
        """From the erase answer; `accepted` is a 202 (the rest continues asynchronously),
        which is incomplete whatever the body says."""
        erased = answer["erased"]
        return cls(
            items=int(erased["items"]),
            complete=not accepted and erased.get("complete", True) is not False,
            erased_at=str(answer["erasedAt"]),
            raw=answer,
        )


@dataclass(frozen=True)
class WindowPreview:
    """The next converse call's window, previewed (nothing recorded, nothing counted), and
    where each retained turn stands.

    `history`, `memory`, `window` and `converse` are what the next call would return
    (`converse` without the call's own message). `standings` maps each retained
    turn's id to one of `window`, `trimmed`, `folded`, `out_of_range` and
    `held_by_neither`; `omitted_tokens` holds the trimmed ones' cut; `counts` the
    number of turns in each standing.
    """

    history: list[dict[str, Any]]
    memory: Memory | None
    memory_version: int | None
    window: Window
    converse: dict[str, Any]
    standings: dict[str, str]
    omitted_tokens: dict[str, int]
    counts: dict[str, int]
    previewed_at: str
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, answer: dict[str, Any]) -> WindowPreview:
        """From the window route's answer."""
        memory = answer.get("memory")
        standings = dict(answer.get("standings") or {})
        return cls(
            history=list(answer["history"]),
            memory=Memory.from_api(memory) if memory else None,
            memory_version=int(memory["version"]) if memory else None,
            window=Window.from_api(answer["window"]),
            converse=dict(answer["converse"]),
            standings={turn_id: str(view["standing"]) for turn_id, view in standings.items()},
            omitted_tokens={
                turn_id: int(view["omittedTokens"])
                for turn_id, view in standings.items()
                if "omittedTokens" in view
            },
            counts={name: int(count) for name, count in dict(answer["counts"]).items()},
            previewed_at=str(answer["previewedAt"]),
            raw=answer,
        )


@dataclass(frozen=True)
class RecalledTurn:
    """A turn a recall found: its id, role (`user` or `assistant`), `sent_at` (RFC 3339),
    and its content blocks in their exact words, a long one cut around the match with
    `… N tokens omitted …` where words were left out."""

    id: str
    role: str
    sent_at: str
    content: list[dict[str, Any]]

    @classmethod
    def from_api(cls, turn: dict[str, Any]) -> RecalledTurn:
        """From a passage's `turn` object."""
        return cls(
            id=str(turn["id"]),
            role=str(turn["role"]),
            sent_at=str(turn["sentAt"]),
            content=list(turn["content"]),
        )


@dataclass(frozen=True)
class RecalledPassage:
    """One of a recall's passages: the turn that matched and its relevance score (higher
    is better; comparable within one answer only)."""

    turn: RecalledTurn
    score: float
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, passage: dict[str, Any]) -> RecalledPassage:
        """From one of the answer's `passages`; `raw` is that passage."""
        return cls(
            turn=RecalledTurn.from_api(passage["turn"]),
            score=float(passage["score"]),
            raw=passage,
        )


@dataclass(frozen=True)
class RecallResult:
    """The contact's older turns that match a query, best first (empty when none does);
    nothing is recorded by asking."""

    passages: list[RecalledPassage]
    raw: dict[str, Any]

    @classmethod
    def from_api(cls, answer: dict[str, Any]) -> RecallResult:
        """From the recall answer, `{"passages": [...]}`."""
        return cls(
            passages=[RecalledPassage.from_api(p) for p in answer["passages"]],
            raw=answer,
        )
