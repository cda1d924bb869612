"""One compaction: read what is unfolded, summarise it onto the memory, commit once.

Duplicate deliveries and racing compactors are expected (a standard queue
delivers at least once): the commit is conditional on the compaction
version, and a second run finds nothing newer than the watermark, so each
turn is folded once. Before summarising, the compactor claims the turns it
read (`claim`): a turn recorded meanwhile below that claim is late, so none
slips under the new watermark unnoticed. Late turns (recorded after
compaction passed their position) wait on the state's late list and are
folded by the next compaction. Nothing here deletes or edits a turn.

Once the fold committed, its turns' term counts go to recall's index
(`memory_core.recall_index`), as the kept copy of the memory does: after the
commit, so a compactor that lost the race indexes nothing. A failure there
leaves the fold standing and those turns out of recall (`index_failed`): the
record is not retried, for a second run finds nothing to fold.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Protocol

from adapters.conversation_store import ConversationKey, ConversationStore, StoredTurn
from adapters.summariser import Summariser, Summary
from memory_core.conversation import ConversationState, LateTurn
from memory_core.fold import alive, next_fold
from memory_core.settings import Settings
from memory_core.turns import Turn, TurnPosition

MAX_TURNS_PER_FOLD = 500
"""Bounds one invocation; a longer backlog is folded by the next request."""
MAX_LATE_TURNS_PER_FOLD = 100
"""Late turns are rare; a longer list is drained over the next compactions."""
CLAIM_ATTEMPTS = 5


class Outcome(Enum):
    FOLDED = "folded"
    NOTHING_TO_FOLD = "nothing_to_fold"
    LOST_RACE = "lost_race"


@dataclass(frozen=True, slots=True)
class Compaction:
    outcome: Outcome
    turns_folded: int = 0
    summary: Summary | None = None
    seconds: float = 0.0


class CompactorTelemetry(Protocol):
    def folded(self, compaction: Compaction) -> None: ...
    def lost_race(self) -> None: ...
    def index_failed(self, key: ConversationKey, error: Exception) -> None: ...


class RecallIndexWriter(Protocol):
    def index_fold(
        self,
        key: ConversationKey,
        version: int,
        turns: Sequence[Turn],
        *,
        erased_at: datetime | None,
    ) -> None: ...


class Compactor:
    def __init__(
        self,
        *,
        store: ConversationStore,
        summariser: Summariser,
        settings: Settings,
        telemetry: CompactorTelemetry,
        recall_index: RecallIndexWriter | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._summariser = summariser
        self._settings = settings
        self._telemetry = telemetry
        self._recall_index = recall_index
        """None: folds are not indexed for recall (the in-memory simulations)."""
        self._clock = clock
        self._wall_clock = wall_clock

    def compact(self, key: ConversationKey) -> Compaction:
        started = self._clock()
        for _ in range(CLAIM_ATTEMPTS):
            state = self._store.state(key)
            if state is None:
                return Compaction(Outcome.NOTHING_TO_FOLD)
            newer = self._store.unfolded_turns(
                key, state.watermark, MAX_TURNS_PER_FOLD, erased_at=state.erased_at
            )
            late = state.late_turns[:MAX_LATE_TURNS_PER_FOLD]
            if not newer and not late:
                self._store.clear_lease(
                    key,
                    expected_recorded=state.turns_recorded,
                    expected_version=state.compaction_version,
                )
                return Compaction(Outcome.NOTHING_TO_FOLD)
            # Late turns join an existing range: only a new watermark needs a claim.
            if not newer or self._store.claim(
                key,
                newer[-1].turn.position,
                expected_version=state.compaction_version,
                expected_recorded=state.turns_recorded,
            ):
                return self._fold(key, state, newer, late, started)
        # Turns keep arriving between the read and the claim: the record comes back later.
        raise ConversationBusy(key)

    def _fold(
        self,
        key: ConversationKey,
        state: ConversationState,
        newer: list[StoredTurn],
        late: tuple[LateTurn, ...],
        started: float,
    ) -> Compaction:
        passed = sorted([*newer, *self._late_turns(key, state, late)], key=_position)
        # An expired turn was counted but nobody can read it any more: passed, not folded.
        live = [s.turn for s in passed if not s.expired]
        fold = summary = None
        if live:
            now = datetime.fromtimestamp(self._wall_clock(), UTC)
            previous = alive(state.fold, now, self._settings.turn_retention_days)
            # A failure here raises: the record fails, comes back, and nothing was written.
            summary = self._summariser.summarise(
                previous.summary if previous else None,
                live,
                self._settings.memory_summary_max_tokens,
            )
            fold = next_fold(previous, live, summary.text, state.compaction_version + 1)
        committed = self._store.commit_fold(
            key,
            fold,
            watermark=newer[-1].turn.position if newer else None,
            late_passed=len(late),
            expected_version=state.compaction_version,
            passed_tokens=sum(s.tokens for s in passed),
            passed_turns=len(passed),
        )
        if not committed:
            self._telemetry.lost_race()
            return Compaction(Outcome.LOST_RACE)
        if not live:
            return Compaction(Outcome.NOTHING_TO_FOLD)
        self._index(key, state, live)
        compaction = Compaction(Outcome.FOLDED, len(live), summary, self._clock() - started)
        self._telemetry.folded(compaction)
        return compaction

    def _index(self, key: ConversationKey, state: ConversationState, live: list[Turn]) -> None:
        if self._recall_index is None:
            return
        try:
            self._recall_index.index_fold(
                key, state.compaction_version + 1, live, erased_at=state.erased_at
            )
        except Exception as error:  # the fold stands; the loss is reported
            self._telemetry.index_failed(key, error)

    def _late_turns(
        self, key: ConversationKey, state: ConversationState, late: tuple[LateTurn, ...]
    ) -> list[StoredTurn]:
        """The late turns to fold with the newer ones, each with what it was counted.

        One above the watermark sorts among the newer turns and is folded with
        them (a claim that died with its compactor made it late). One whose TTL
        deleted it is passed on its listed estimate.
        """
        mark = state.watermark
        below = [entry for entry in late if mark is not None and entry.position <= mark]
        found = {s.turn.position: s for s in self._store.turns_at(key, [e.position for e in below])}
        return [found.get(e.position) or _deleted(e) for e in below]


def _position(stored: StoredTurn) -> TurnPosition:
    return stored.turn.position


def _deleted(entry: LateTurn) -> StoredTurn:
    """A late turn DynamoDB's TTL deleted before it could be folded: passed, as expired."""
    position = entry.position
    placeholder = Turn(position.turn_id, "user", (), position.sent_at, position.recorded_at)
    return StoredTurn(placeholder, entry.tokens, expired=True)


class ConversationBusy(Exception):
    """No claim could be taken: turns kept arriving between the read and the claim."""

    def __init__(self, key: ConversationKey) -> None:
        super().__init__(f"{key.partition}: turns kept arriving; compaction will be retried")
