"""One compaction: read what is unfolded, summarise it onto the memory, commit once.

Duplicate deliveries and racing compactors are expected (a standard queue
delivers at least once): the commit is conditional on the fold's version,
and a second run finds nothing newer than the watermark, so each turn is
folded once. Nothing here deletes or edits a turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from adapters.conversation_store import ConversationKey, ConversationStore
from adapters.summariser import Summariser, Summary
from memory_core.fold import next_fold
from memory_core.settings import Settings

MAX_TURNS_PER_FOLD = 500
"""Bounds one invocation; a longer backlog is folded by the next request."""


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


class Compactor:
    def __init__(
        self,
        *,
        store: ConversationStore,
        summariser: Summariser,
        settings: Settings,
        telemetry: CompactorTelemetry,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._summariser = summariser
        self._settings = settings
        self._telemetry = telemetry
        self._clock = clock

    def compact(self, key: ConversationKey) -> Compaction:
        started = self._clock()
        state = self._store.state(key)
        if state is None:
            return Compaction(Outcome.NOTHING_TO_FOLD)
        previous = state.fold
        stored = self._store.unfolded_turns(
            key, previous.watermark if previous else None, MAX_TURNS_PER_FOLD
        )
        if not stored:
            self._store.clear_lease(key)
            return Compaction(Outcome.NOTHING_TO_FOLD)
        turns = [s.turn for s in stored]
        # A failure here raises: the record fails, comes back, and nothing was written.
        summary = self._summariser.summarise(
            previous.summary if previous else None, turns, self._settings.memory_summary_max_tokens
        )
        fold = next_fold(previous, turns, summary.text)
        committed = self._store.commit_fold(
            key,
            fold,
            expected_version=previous.version if previous else 0,
            folded_tokens=sum(s.tokens for s in stored),
            folded_turns=len(stored),
        )
        if not committed:
            self._telemetry.lost_race()
            return Compaction(Outcome.LOST_RACE)
        compaction = Compaction(Outcome.FOLDED, len(turns), summary, self._clock() - started)
        self._telemetry.folded(compaction)
        return compaction
