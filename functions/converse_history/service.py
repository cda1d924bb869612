"""The converse call, step by step (SPEC 5), over the store and the queue.

The steps read like the spec: validate and resolve the rules, record the
message with the state change in one transaction, apply the turn cap, bound
the history, attach the fold, check coverage, trigger compaction. The usual
path is one read (state + newest turns) and one write (the transaction).
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, Protocol

from adapters.compaction_queue import CompactionQueue
from adapters.conversation_store import (
    ConversationKey,
    ConversationStore,
    Duplicate,
    ErasedSince,
    MessageTooLarge,
    RecordedTurn,
    StateChange,
    VersionConflict,
    check_item_size,
    content_digest,
    encode_content,
    format_instant,
)
from adapters.rules_source import RulesSource
from converse_history.access import Caller, tenant_for
from converse_history.answers import (
    escalation,
    fold_in_range,
    memory_view,
    rate_limited,
    turn_view,
    window_answer,
)
from converse_history.errors import ApiError, invalid
from converse_history.next_window import choose_window, snapshot_page_size
from converse_history.replay import replayed_answer
from memory_core.compaction_trigger import compaction_due
from memory_core.conversation import ConversationState
from memory_core.coverage import held_by_neither
from memory_core.erasure import erased, marker_erased, placed_after
from memory_core.history_range import history_cutoff, turn_lifetime_days
from memory_core.pending_calls import answers_only_tools, unanswered_calls
from memory_core.rate_limit import remember, seconds_until_free
from memory_core.repair_incidents import first_appearances
from memory_core.repairs import Repair
from memory_core.rules import TenantRules
from memory_core.settings import Settings
from memory_core.tokens import estimate_turn_tokens
from memory_core.trim import prepared
from memory_core.turn_cap import exceeds_cap, next_streak
from memory_core.turns import Role, Turn, TurnPosition
from memory_core.usage import TokenUsage
from memory_core.window import Window

FUTURE_TOLERANCE = timedelta(minutes=5)
COMMIT_ATTEMPTS = 40
BACKOFF_BASE_SECONDS = 0.01
BACKOFF_CAP_SECONDS = 0.25


class Telemetry(Protocol):
    """What the converse call reports; whatever concerns one conversation names its key."""

    def window_built(self, window: Window) -> None: ...
    def window_bounded(self, key: ConversationKey, window: Window) -> None: ...
    def coverage_gap(self, key: ConversationKey, missing: list[TurnPosition]) -> None: ...
    def fragment_repaired(self, key: ConversationKey, repairs: list[Repair]) -> None: ...
    def escalated(self, key: ConversationKey, turn_count: int) -> None: ...
    def compaction_enqueued(self) -> None: ...
    def compaction_request_failed(self, key: ConversationKey, error: Exception) -> None: ...
    def commit_retried(self, attempt: int) -> None: ...
    def replay_memory_missing(self, key: ConversationKey, version: int) -> None: ...
    def reply_usage(self, key: ConversationKey, usage: TokenUsage) -> None: ...


@dataclass(frozen=True, slots=True)
class Incoming:
    id: str | None
    role: Role
    content: list[dict[str, Any]]
    sent_at: datetime | None


class ConverseService:
    def __init__(
        self,
        *,
        store: ConversationStore,
        queue: CompactionQueue,
        rules: RulesSource,
        settings: Settings,
        telemetry: Telemetry,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._queue = queue
        self._rules = rules
        self._settings = settings
        self._telemetry = telemetry
        self._clock = clock
        self._sleep = sleep

    # -- routes --------------------------------------------------------------------

    def converse(
        self, tenant_id: str, contact_id: str, message: Incoming, caller: Caller
    ) -> dict[str, Any]:
        tenant = tenant_for(self._rules, tenant_id, caller)
        key = ConversationKey(tenant_id, contact_id)
        turn = prepared(self._turn(message, field="message."), self._settings.window_limits.trim)
        tokens = estimate_turn_tokens(turn)
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                return self._converse_once(key, tenant, turn, tokens)
            except VersionConflict:
                self._telemetry.commit_retried(attempt)
                self._back_off(attempt)
            except ErasedSince as erase:
                # Arrived while the contact was being erased: a message of the new conversation.
                turn = placed_after(turn, erase.erased_at, self._now())
            except Duplicate as duplicate:
                self._same_message(turn, duplicate.first)
                return replayed_answer(
                    self._store,
                    self._telemetry,
                    key,
                    tenant=tenant,
                    limits=self._settings.window_limits,
                    page_size=self._page_size,
                    turn=turn,
                    first=duplicate.first,
                )
        raise ApiError(409, "conflict", "the conversation is busy; retry the same message id")

    def record(
        self,
        tenant_id: str,
        contact_id: str,
        message: Incoming,
        caller: Caller,
        *,
        usage: TokenUsage | None = None,
    ) -> dict[str, Any]:
        """A reply (or tool results) recorded; `usage`, the model's, kept with the turn.

        The usage is counted when the turn is first recorded: a replay of the id
        records nothing, so it counts nothing. A replay may leave the usage out,
        but one that reports other figures than were recorded (or any, where none
        were) is refused, naming `usage`, rather than answered as if kept.
        """
        tenant = tenant_for(self._rules, tenant_id, caller)
        key = ConversationKey(tenant_id, contact_id)
        turn = prepared(self._turn(message, field=""), self._settings.window_limits.trim)
        tokens = estimate_turn_tokens(turn)
        erased_at = None
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                self._store.record_reply(
                    key,
                    turn,
                    tokens,
                    lifetime_days=self._lifetime_days(tenant),
                    usage=usage,
                    erased_at=erased_at,
                )
            except ErasedSince as erase:
                # Arrived while the contact was being erased: a turn of the new conversation.
                erased_at = erase.erased_at
                turn = placed_after(turn, erased_at, self._now())
                continue
            except VersionConflict:
                # A reply takes no lock, but DynamoDB still cancels its transaction when
                # another one holds the same state item (TransactionConflict) or an item
                # is throttled; nothing was written, so it is retried like a converse
                # commit instead of failing the call (found by tests/integration/test_faults.py).
                self._telemetry.commit_retried(attempt)
                self._back_off(attempt)
                continue
            except Duplicate as duplicate:
                fence = self._fence(key) if erased_at is None else erased_at
                if marker_erased(duplicate.first.position.recorded_at, fence):
                    # Its id was recorded before the contact was erased: a new message.
                    erased_at = fence
                    turn = placed_after(turn, fence, self._now())
                    continue
                self._same_message(turn, duplicate.first)
                if usage is not None:
                    self._same_usage(key, duplicate.first, usage)
                turn = Turn(turn.id, turn.role, turn.content, duplicate.first.position.sent_at)
            else:
                if usage is not None:
                    self._telemetry.reply_usage(key, usage)
            return {"turn": turn_view(turn)}
        raise ApiError(409, "conflict", "the conversation is busy; retry the same message id")

    def memory(self, tenant_id: str, contact_id: str, caller: Caller) -> dict[str, Any] | None:
        tenant = tenant_for(self._rules, tenant_id, caller)
        state = self._store.state(ConversationKey(tenant_id, contact_id))
        if state is None or state.holds_nothing:
            return None
        now = self._now()
        fold = fold_in_range(state.fold, history_cutoff(now, tenant.history_days))
        return {
            "memory": memory_view(fold),
            "counters": {
                "turnCount": state.streak.count,
                "unfoldedTokens": state.unfolded_tokens,
                "unfoldedTurns": state.unfolded_turns,
                "turnsRecorded": state.turns_recorded,
                "lateTurns": len(state.late_turns),
                "compactionInFlight": state.lease_until is not None and state.lease_until > now,
            },
        }

    # -- the converse steps --------------------------------------------------------

    @property
    def _page_size(self) -> int:
        return snapshot_page_size(self._settings)

    def _converse_once(
        self, key: ConversationKey, tenant: TenantRules, turn: Turn, tokens: int
    ) -> dict[str, Any]:
        since = history_cutoff(turn.sent_at, tenant.history_days)
        snapshot = self._store.snapshot(key, since, turn.position, self._page_size)
        state = snapshot.state
        if erased(turn.position, state.erased_at):
            assert state.erased_at is not None
            raise ErasedSince(state.erased_at)
        arrival = turn.position.recorded_at
        newest_first = snapshot.newest_first
        streak, recent_contact = state.streak, state.recent_contact
        if answers_only_tools(turn):
            # The agent's tool loop going on, not the contact's words: neither the rate
            # limit nor the cap counts it, and it must answer a pending call.
            newest_first = self._answering_pending_calls(key, turn, newest_first, state.erased_at)
        else:
            wait = seconds_until_free(recent_contact, arrival, tenant.rate_limit)
            if wait:
                self._unless_recorded(key, turn, rate_limited(wait), state.erased_at)
            streak = next_streak(streak, turn.sent_at, tenant.idle_reset_hours)
            recent_contact = remember(recent_contact, arrival, tenant.rate_limit)
        escalate = exceeds_cap(streak, tenant.max_turns_per_conversation)
        lease = self._lease_if_due(state, tokens)
        # The window comes from the snapshot, before the commit: its figures go
        # into the message id's marker, so a retry is answered the same.
        window = None
        memory = fold_in_range(state.fold, since)
        # An escalation serves no window: a stable edge stays for the calls after it.
        edge = state.stable_edge if tenant.prompt_cache == "stable" else None
        covered_to = state.watermark
        if not escalate:
            chosen = choose_window(
                self._store,
                key,
                state,
                newest_first,
                tenant=tenant,
                limits=self._settings.window_limits,
                since=since,
                turn=turn,
            )
            window, memory, edge = chosen.window, chosen.memory, chosen.edge
            covered_to = chosen.covered_to
        self._store.record_contact_turn(
            key,
            turn,
            tokens=tokens,
            change=StateChange(
                expected_version=state.version,
                streak=streak,
                recent_contact=recent_contact,
                lease_until=lease,
                # Compaction has passed this position already: the next one folds it.
                late=state.is_late(turn.position),
                stable_edge=edge,
                window_at=arrival if window else None,
                erased_at=state.erased_at,
                list_contact=not state.listed,
            ),
            turn_count=streak.count,
            decision="escalate" if escalate else "model",
            dropped=window.dropped if window else None,
            memory_version=memory.version if memory and window else 0,
            lifetime_days=self._lifetime_days(tenant),
            window_from=edge.oldest if edge and window else None,
        )
        if lease is not None:
            self._request_compaction(key, lease)
        if window is None:
            self._telemetry.escalated(key, streak.count)
            return escalation(streak.count, turn)
        self._observe(
            key,
            window,
            state=state,
            since=since,
            current=turn,
            tenant=tenant,
            covered_to=covered_to,
        )
        answer, repairs = window_answer(streak.count, turn, window, memory, tenant=tenant)
        new_repairs = first_appearances(repairs, window.turns, state.last_window_at)
        if new_repairs:
            self._telemetry.fragment_repaired(key, new_repairs)
        return answer

    def _answering_pending_calls(
        self,
        key: ConversationKey,
        turn: Turn,
        newest_first: Iterator[Turn],
        erased_at: datetime | None,
    ) -> Iterator[Turn]:
        """The same newest-first turns, once the message's results are found to answer
        pending calls, each once; else the message is refused, naming the result."""
        read: list[Turn] = []

        def reading() -> Iterator[Turn]:
            for earlier in newest_first:
                read.append(earlier)
                yield earlier

        pending = unanswered_calls(reading())
        for index, block in enumerate(turn.content):
            tool_use_id = block["toolResult"]["toolUseId"]
            if tool_use_id not in pending:
                field = f"message.content[{index}].toolResult.toolUseId"
                reason = f"{tool_use_id!r} answers no pending tool call of this conversation"
                self._unless_recorded(key, turn, invalid(field, reason), erased_at)
            pending.remove(tool_use_id)
        return itertools.chain(read, newest_first)

    def _unless_recorded(
        self, key: ConversationKey, turn: Turn, refusal: ApiError, erased_at: datetime | None
    ) -> NoReturn:
        """A retry of a message already recorded is answered as it was; any other is refused.

        A recording from before the contact's latest erase is no one's any more.
        """
        first = self._store.recorded(key, turn.id)
        if first is not None and not marker_erased(first.position.recorded_at, erased_at):
            raise Duplicate(first)
        raise refusal

    def _fence(self, key: ConversationKey) -> datetime | None:
        """The fence of the contact's latest erase, if any (one read)."""
        state = self._store.state(key)
        return state.erased_at if state else None

    def _observe(
        self,
        key: ConversationKey,
        window: Window,
        *,
        state: ConversationState,
        since: datetime,
        current: Turn,
        tenant: TenantRules,
        covered_to: TurnPosition | None,
    ) -> None:
        """Telemetry of the window, and the coverage check against the memory served
        (it holds every turn up to `covered_to`, but the late ones)."""
        self._telemetry.window_built(window)
        if window.dropped:
            self._telemetry.window_bounded(key, window)
        alive_since = self._now() - timedelta(days=self._lifetime_days(tenant))
        missing = held_by_neither(
            window.passed_over,
            window.oldest_position,
            covered_to,
            late={entry.position for entry in state.late_turns},
            since=max(since, alive_since),
            before=current.position,
        )
        if missing:
            self._telemetry.coverage_gap(key, missing)

    def _lifetime_days(self, tenant: TenantRules) -> int:
        return turn_lifetime_days(self._settings.turn_retention_days, tenant.history_days)

    def _lease_if_due(self, state: ConversationState, tokens: int) -> datetime | None:
        now = self._now()
        after = ConversationState(
            unfolded_tokens=state.unfolded_tokens + tokens,
            unfolded_turns=state.unfolded_turns + 1,
            lease_until=state.lease_until,
        )
        if not compaction_due(after, self._settings, now):
            return None
        return now + timedelta(seconds=self._settings.compaction_lease_seconds)

    def _request_compaction(self, key: ConversationKey, lease: datetime) -> None:
        try:
            self._queue.request_compaction(key, self._now())
        except Exception as error:
            self._telemetry.compaction_request_failed(key, error)
            # Give the lease back so that the next turn asks again.
            try:
                self._store.release_lease(key, lease)
            except Exception as release_error:
                # The turn is committed: failing the call now would only make the caller
                # retry a message already recorded. The lease expires by itself
                # (COMPACTION_LEASE_SECONDS), and then a later turn asks again.
                self._telemetry.compaction_request_failed(key, release_error)
            return
        self._telemetry.compaction_enqueued()

    # -- helpers -------------------------------------------------------------------

    def _turn(self, message: Incoming, field: str) -> Turn:
        """The turn to record; `field` prefixes its fields' names in refusals ("message." or "")."""
        now = self._now()
        stated = (message.sent_at or now).astimezone(UTC)
        if stated > now + FUTURE_TOLERANCE:
            raise ApiError(
                422,
                "sent_at_in_future",
                f"{field}sentAt: {format_instant(stated)} is more than 5 minutes ahead "
                f"of the service's clock ({format_instant(now)})",
            )
        # A message cannot have been sent after it arrived: a time ahead is its sender's
        # clock running fast, and placed there it would follow messages that arrived
        # after it (and miss their windows). It takes its arrival; a past time is kept,
        # as replayed transcripts and late replies need (docs/decisions.md).
        sent_at = min(stated, now)
        turn = Turn(
            message.id or uuid.uuid4().hex,
            message.role,
            message.content,
            sent_at,
            now,
            stated_sent_at=stated if stated > now else None,
        )
        try:
            check_item_size(encode_content(turn))
        except MessageTooLarge as error:
            raise ApiError(413, "message_too_large", str(error)) from None
        return turn

    def _same_message(self, turn: Turn, first: RecordedTurn) -> None:
        if first.digest != content_digest(turn.role, list(turn.content)):
            raise ApiError(
                409,
                "id_reused",
                f"message id {turn.id!r} was recorded before with other content",
            )

    def _same_usage(self, key: ConversationKey, first: RecordedTurn, usage: TokenUsage) -> None:
        """A replay's usage is the one recorded with its first call, or it is refused."""
        recorded = [stored.usage for stored in self._store.turns_at(key, [first.position])]
        if recorded == [usage]:
            return
        kept = "other usage" if recorded and recorded[0] is not None else "no usage"
        raise ApiError(
            409,
            "id_reused",
            f"usage: message id {first.position.turn_id!r} was recorded with {kept}; "
            "a retry sends the usage its first call sent, or none",
        )

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _back_off(self, attempt: int) -> None:
        # Full jitter: parallel writers to one conversation spread out instead of colliding again.
        ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** min(attempt, 8))
        self._sleep(random.uniform(0, ceiling))
