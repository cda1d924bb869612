"""The conversation store's port: what the service and the compactor need of a store.

`DynamoDBConversationStore` is the production adapter; the in-memory one in
the tests' support package keeps the same contract (a shared test checks it)
so that long simulations run without an emulator.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from memory_core.conversation import ConversationState, Fold
from memory_core.stable_window import StableEdge
from memory_core.turn_cap import Streak
from memory_core.turns import Turn, TurnPosition
from memory_core.usage import TokenUsage

# DynamoDB's item limit is 400 KB, attribute names included; the margin covers
# the turn item's other attributes and keys.
ITEM_LIMIT_BYTES = 400 * 1024
TURN_ITEM_OVERHEAD_BYTES = 1024


@dataclass(frozen=True, slots=True)
class ConversationKey:
    tenant_id: str
    contact_id: str

    @property
    def partition(self) -> str:
        return f"TENANT#{self.tenant_id}#CONTACT#{self.contact_id}"

    def log_fields(self) -> dict[str, str]:
        """Who a log line is about: the tenant and the contact, never what was said."""
        return {"tenant": self.tenant_id, "contact": self.contact_id}


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """What the first recording of a message id answered (the idempotency marker)."""

    position: TurnPosition
    role: str
    digest: str
    turn_count: int | None
    decision: str | None
    dropped: int | None
    memory_version: int | None = None
    """The version of the memory the first answer served (`Fold.version`); 0 when it
    served none; None for a marker written before versions were kept."""
    window_from: TurnPosition | None = None
    """The oldest turn of a cache-stable window the first answer served (its edge)."""


@dataclass(frozen=True, slots=True)
class StoredTurn:
    turn: Turn
    tokens: int
    """The estimate counted into the unfolded counter when the turn was recorded."""
    expired: bool = False
    """Its TTL has passed: it is read by no one, and never folded."""
    usage: TokenUsage | None = None
    """The model's usage for a reply, as recorded with it (never part of its content)."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """What one converse commit does to the conversation state."""

    expected_version: int
    streak: Streak
    recent_contact: tuple[datetime, ...]
    lease_until: datetime | None
    """Set when this commit takes the compaction lease."""
    late: bool = False
    """The turn is at or below the state's late bound, as read: it joins the late list."""
    stable_edge: StableEdge | None = None
    """The cache-stable window's edge after this call; None clears it."""
    window_at: datetime | None = None
    """The message's arrival, when a window is served for it (no escalation): it becomes
    the state's `last_window_at`; None leaves that as it was."""
    erased_at: datetime | None = None
    """The fence of the contact's latest erase, as read: a message-id marker recorded at
    or before it is replaced (the id is a new message)."""
    list_contact: bool = False
    """The conversation is not in the tenant's contacts listing yet: this commit lists it."""


class Duplicate(Exception):
    """The message id was recorded before; `first` is what that recording answered."""

    def __init__(self, first: RecordedTurn) -> None:
        super().__init__(first.position.turn_id)
        self.first = first


class VersionConflict(Exception):
    """Another writer committed to this conversation since it was read."""


class ErasedSince(Exception):
    """The contact was erased after this write's arrival: stamp it after `erased_at`."""

    def __init__(self, erased_at: datetime) -> None:
        super().__init__(erased_at.isoformat())
        self.erased_at = erased_at


class MessageTooLarge(ValueError):
    def __init__(self, size: int) -> None:
        super().__init__(
            f"the message is {size} bytes stored; the store's item limit is "
            f"{ITEM_LIMIT_BYTES - TURN_ITEM_OVERHEAD_BYTES} bytes"
        )
        self.size = size


def format_instant(instant: datetime) -> str:
    utc = instant.astimezone(UTC)
    # strftime's %Y does not zero-pad years below 1000; sort keys need a fixed width.
    return f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.%fZ")


def parse_instant(text: str) -> datetime:
    """An instant as `format_instant` wrote it (stored values only, never input).

    `fromisoformat` reads that shape, `Z` included, some 50 times faster than
    `strptime`: every turn the window reads has its key parsed.
    """
    return datetime.fromisoformat(text)


def content_digest(role: str, content: object) -> str:
    canonical = json.dumps([role, content], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def encode_content(turn: Turn) -> str:
    return json.dumps(list(turn.content), separators=(",", ":"), ensure_ascii=False)


def check_item_size(encoded_content: str) -> None:
    size = len(encoded_content.encode())
    if size > ITEM_LIMIT_BYTES - TURN_ITEM_OVERHEAD_BYTES:
        raise MessageTooLarge(size)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state and a lazy, newest-first reader of the history range."""

    state: ConversationState
    newest_first: Iterator[Turn]


# -- a conversation's data: export, listing, erase ------------------------------------


@dataclass(frozen=True, slots=True)
class TurnsPage:
    turns: list[StoredTurn]
    """Oldest first, as recorded (content, usage), at most the page's limit."""
    last: TurnPosition | None
    """Where the next page starts after; None when this page is the last."""
    stored: bool
    """Anything is stored for the contact (a state that an erase did not leave empty)."""


@dataclass(frozen=True, slots=True)
class ContactEntry:
    contact_id: str
    last_message_at: datetime | None
    """When the contact last wrote (the state's `lastContactAt`); None for a conversation
    of replies only."""


@dataclass(frozen=True, slots=True)
class ContactsPosition:
    """Where a contacts page stopped: the shard, and the last contact listed in it."""

    shard: int
    contact_id: str


@dataclass(frozen=True, slots=True)
class ContactsPage:
    contacts: list[ContactEntry]
    last: ContactsPosition | None


@dataclass(frozen=True, slots=True)
class Fence:
    """An erase's fence: what it covers, and whether the state was erased by setting it."""

    erased_at: datetime
    folds_below: int
    """Memories kept under a compaction version below this are the erased conversation's."""
    state_erased: bool
    """The state held something (counters, memory, rate records, listing) and was erased."""


@dataclass(frozen=True, slots=True)
class Deleted:
    items: int
    complete: bool
    """Nothing the fence covers is left; False when the budget ran out first."""


class ConversationStore(Protocol):
    def snapshot(
        self, key: ConversationKey, since: datetime, before: TurnPosition, page_size: int
    ) -> Snapshot: ...
    def state(self, key: ConversationKey) -> ConversationState | None: ...
    def recorded(self, key: ConversationKey, turn_id: str) -> RecordedTurn | None: ...
    def fold_at(self, key: ConversationKey, version: int) -> Fold | None: ...
    def unfolded_turns(
        self,
        key: ConversationKey,
        after: TurnPosition | None,
        limit: int,
        *,
        erased_at: datetime | None = None,
    ) -> list[StoredTurn]: ...
    def turns_at(
        self, key: ConversationKey, positions: Sequence[TurnPosition]
    ) -> list[StoredTurn]: ...
    def record_contact_turn(
        self,
        key: ConversationKey,
        turn: Turn,
        *,
        tokens: int,
        change: StateChange,
        turn_count: int,
        decision: str,
        dropped: int | None,
        memory_version: int,
        lifetime_days: int,
        window_from: TurnPosition | None = None,
    ) -> None: ...
    def record_reply(
        self,
        key: ConversationKey,
        turn: Turn,
        tokens: int,
        *,
        lifetime_days: int,
        usage: TokenUsage | None = None,
        erased_at: datetime | None = None,
    ) -> None: ...
    def release_lease(self, key: ConversationKey, lease_until: datetime) -> None: ...
    def claim(
        self,
        key: ConversationKey,
        through: TurnPosition,
        *,
        expected_version: int,
        expected_recorded: int,
    ) -> bool: ...
    def commit_fold(
        self,
        key: ConversationKey,
        fold: Fold | None,
        *,
        watermark: TurnPosition | None,
        late_passed: int,
        expected_version: int,
        passed_tokens: int,
        passed_turns: int,
    ) -> bool: ...
    def clear_lease(
        self, key: ConversationKey, *, expected_recorded: int, expected_version: int
    ) -> None: ...


class ConversationData(Protocol):
    """What the data routes need of a store: the export, the listing and the erase."""

    def turns_page(
        self, key: ConversationKey, after: TurnPosition | None, limit: int
    ) -> TurnsPage: ...
    def contacts_page(
        self, tenant_id: str, after: ContactsPosition | None, limit: int
    ) -> ContactsPage: ...
    def fence_off(self, key: ConversationKey, erased_at: datetime) -> Fence | None: ...
    def delete_fenced(self, key: ConversationKey, fence: Fence, *, max_items: int) -> Deleted: ...
