"""A turn: one message of a conversation, in Bedrock Converse's content shape.

Plain slotted dataclasses rather than pydantic models: the window touches every
message it reads, and request validation has already happened at the edge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple

Role = Literal["user", "assistant"]
ContentBlock = Mapping[str, Any]


class TextCut(NamedTuple):
    """Where a trim cuts a long text turn, worked out once, as the turn is recorded.

    A window reads the same long turns call after call; with their cut kept beside
    them it slices them instead of searching them again. `shape` is the trim's
    (its budget, head and tail, in tokens): a cut made for another is not used.
    """

    shape: tuple[int, int, int]
    head: int
    """Characters kept from the start."""
    tail: int
    """Characters kept from the end."""
    omitted: int
    """Tokens cut, as the marker says."""
    units: int
    """What the trimmed text costs, marker line included."""


class TurnPosition(NamedTuple):
    """Where a turn sits in its conversation: by `sentAt`, then by arrival, then by id.

    `sentAt` is the conversation's clock, often to the second only (a
    WhatsApp timestamp, say): a reply stamped in the same second as its
    question must still follow it, so ties go to the turn recorded first. A
    `sentAt` is never later than the arrival: a message cannot have been sent
    after it arrived, so a sender's clock that runs ahead is replaced by the
    service's (`Turn.stated_sent_at` keeps what it said).
    """

    sent_at: datetime
    recorded_at: datetime
    turn_id: str


@dataclass(frozen=True, slots=True)
class Turn:
    id: str
    role: Role
    content: Sequence[ContentBlock]
    sent_at: datetime
    recorded_at: datetime | None = None
    """When the service received it; None for a turn not recorded yet (its `sentAt` stands in)."""
    stated_sent_at: datetime | None = None
    """The `sentAt` its sender gave, kept only where the conversation could not use it:
    a time ahead of the service's clock, where `sent_at` is the arrival instead."""
    cost_units: int | None = field(default=None, compare=False)
    """Its token estimate in cost units (memory_core.tokens), once made: when it was
    recorded, and kept with it by the store, so reading a history estimates nothing."""
    text_cut: TextCut | None = field(default=None, compare=False)
    """A long text turn's cut by the service's trim, made as it was recorded."""

    @property
    def position(self) -> TurnPosition:
        return TurnPosition(self.sent_at, self.recorded_at or self.sent_at, self.id)

    @property
    def returns_tool_results(self) -> bool:
        return any("toolResult" in block for block in self.content)

    @property
    def is_question(self) -> bool:
        """A contact's message that asks something: a `user` turn carrying text.

        A `user` turn that returns tool results belongs to the exchange before it
        (it answers that exchange's `toolUse`), even when it also carries text,
        so that a `toolResult` is never separated from its `toolUse`.
        """
        if self.role != "user" or self.returns_tool_results:
            return False
        return any(block.get("text") for block in self.content)

    def with_content(self, content: Sequence[ContentBlock]) -> Turn:
        """The turn with other content: its estimate and cut are the old content's, and go."""
        return Turn(
            self.id, self.role, content, self.sent_at, self.recorded_at, self.stated_sent_at
        )

    def as_message(self) -> dict[str, Any]:
        """The Converse message for this turn."""
        return {"role": self.role, "content": [dict(block) for block in self.content]}
