"""A stateful model test: the real service and compactor against a reference of the spec.

Hypothesis drives one conversation through random sequences of contact
messages (sometimes with an id, sometimes a retry of an earlier id, sometimes
delivered late), agent replies (on time or late), id reuse with other
content, compactions (at once, or only for the queued requests), clock jumps
(minutes to 31 days), messages from the future, and erases of the contact
(SPEC 10: at any point, from inside a compaction, with a deletion budget that
sometimes leaves the rest to queued continuations, and ids of the erased
conversation sent again), on the in-memory store. After every step the
store, the conversation state, the memory route, the export and every answer
are compared with `tests/support/reference_model.py`, a naive model written
from the spec: nothing recorded before the latest erase is ever served, and
once no deletion is pending the store holds nothing else.

The conversation's clock (`sentAt`) is passed explicitly, and the service's
and the store's wall clock (the 5-minute future check, the TTL, the lease)
follow it: a conversation replayed years in the past against the real wall
clock would have every turn past its 60-day TTL, so nothing would ever reach
a window. The clock starts three years ago and never passes the real now.

The tests at the end of this module replay, step by step, the sequences
this machine found: each one a bug fixed since.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from compactor.service import Compactor, Outcome
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_items import (
    MEMORY_SK,
    STATE_SK,
    fold_sort_key,
    marker_sort_key,
    turn_sort_key,
)
from adapters.summariser import OfflineSummariser, Summary
from converse_history.access import Caller
from converse_history.erase import ITEMS_PER_INVOCATION, ContactErasure, ErasureDeletion
from converse_history.errors import ApiError
from converse_history.export import TurnsExport
from converse_history.service import ConverseService, Incoming
from memory_core.conversation import Fold
from memory_core.rules import RulesDocument, parse_rules
from memory_core.settings import load_settings
from memory_core.turns import Role, Turn, TurnPosition
from tests.support.in_memory_store import InMemoryConversationStore
from tests.support.reference_model import (
    ExpectedWindow,
    Limits,
    ReferenceConversation,
    RefFold,
    RefTurn,
    tokens,
)
from tests.support.reliability import tally
from tests.support.simulation import CollectingQueue, Observed

TENANT = "stateful"
CONTACT = "c1"
KEY = ConversationKey(TENANT, CONTACT)
CALLER = Caller(arn=None, identity_required=False)

# Small limits, to reach the interesting states (cap, trim, floor, fold, gaps) quickly.
LIMITS = Limits(
    window_tokens=400,
    window_messages=8,
    floor_messages=3,
    message_max_tokens=100,
    fold_min_tokens=200,
    retention_days=60,
    summary_max_tokens=100,
    lease_seconds=900,
    history_days=30,
    idle_reset_hours=2,
    max_turns=5,
)
ENVIRONMENT = {
    "HISTORY_WINDOW_MAX_TOKENS": str(LIMITS.window_tokens),
    "MEMORY_FOLD_MIN_TOKENS": str(LIMITS.fold_min_tokens),
    "HISTORY_WINDOW_MAX_MESSAGES": str(LIMITS.window_messages),
    "HISTORY_WINDOW_FLOOR_MESSAGES": str(LIMITS.floor_messages),
    "HISTORY_MESSAGE_MAX_TOKENS": str(LIMITS.message_max_tokens),
    "MEMORY_SUMMARY_MAX_TOKENS": str(LIMITS.summary_max_tokens),
    "TURN_RETENTION_DAYS": str(LIMITS.retention_days),
    "COMPACTION_LEASE_SECONDS": str(LIMITS.lease_seconds),
}
TENANT_RULES = {
    "historyDays": LIMITS.history_days,
    "idleResetHours": LIMITS.idle_reset_hours,
    "maxTurnsPerConversation": LIMITS.max_turns,
}
SETTINGS = load_settings(ENVIRONMENT)  # refuses limits that break SPEC 2's 2x rule

REAL_NOW = datetime.now(UTC).replace(microsecond=0)
START = REAL_NOW - timedelta(days=3 * 365)

SIZES = st.one_of(
    st.integers(1, 40), st.integers(41, 400), st.integers(401, 2000), st.integers(2001, 20_000)
)
FILLS = st.sampled_from(["a", "é", "😀"])
TICKS = st.integers(1, 900).map(lambda s: timedelta(seconds=s))
IDLE = timedelta(hours=LIMITS.idle_reset_hours)
RANGE = timedelta(days=LIMITS.history_days)
JUMPS = st.one_of(
    st.integers(1, 59).map(lambda m: timedelta(minutes=m)),
    st.integers(1, 5).map(lambda h: timedelta(hours=h)),
    # The boundaries: a gap of exactly idleResetHours resets the streak; a turn sent
    # exactly historyDays before the current message is in range (docs/decisions.md).
    st.sampled_from([IDLE - timedelta(seconds=1), IDLE, RANGE - timedelta(seconds=1), RANGE]),
    st.sampled_from([timedelta(hours=25), timedelta(days=10), timedelta(days=31)]),
)

# Late turns fall half a second off the on-time ones, so that they rarely share a
# sentAt; where turns do (see `reply_stamped_in_the_same_instant`), the arrival breaks
# the tie (every call reaches the service a microsecond after the last), never an id the
# service generated at random, which would make a failure impossible to replay.
HALF_SECOND = timedelta(milliseconds=500)
LATENESS = st.one_of(
    st.integers(1, 59).map(lambda m: timedelta(minutes=m)),
    st.sampled_from(
        [timedelta(hours=3), timedelta(days=1), timedelta(days=31), timedelta(days=59)]
    ),
)

# An erase deletes at most this many items before it queues the rest: the production
# budget (everything at once, here), or a handful (the rest left to continuations).
BUDGETS = st.one_of(st.just(ITEMS_PER_INVOCATION), st.integers(1, 6))
EXPORT_PAGE = 3
"""The export read in pages this long, so that its cursors are followed too."""
TAG = re.compile(r"<\d+>")
"""Every text starts with its serial, `<n>`, where it is long enough to hold it."""
# A compaction's steps an erase may come between: its claim of the turns it read, its
# summariser call, its commit.
STAGES = st.sampled_from(["claim", "summarise", "commit"])

# The deep profile (HYPOTHESIS_PROFILE=deep) sets the number of examples; by
# default the run is bounded to stay within the suite's time budget.
DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"
PROFILE = settings.default
assert PROFILE is not None
EXAMPLES = PROFILE.max_examples if DEEP else min(PROFILE.max_examples, 100)
STEPS = 200 if DEEP else 100


class OneTenant:
    def __init__(self) -> None:
        self._rules = parse_rules({"tenants": {TENANT: TENANT_RULES}}, LIMITS.retention_days)

    def current(self) -> RulesDocument:
        return self._rules


class Interruption:
    """Something to run once, when a compaction reaches a given step (an erase, here)."""

    def __init__(self) -> None:
        self._stage: str | None = None
        self._action: Callable[[], None] = lambda: None

    def arm(self, stage: str, action: Callable[[], None]) -> None:
        self._stage, self._action = stage, action

    def reached(self, stage: str) -> None:
        if stage == self._stage:
            self._stage = None
            self._action()

    def disarm(self) -> None:
        self._stage = None


class InterruptibleStore(InMemoryConversationStore):
    """The in-memory store, interrupted as a compaction claims its turns or commits."""

    def __init__(self, interruption: Interruption, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._interruption = interruption

    def claim(
        self,
        key: ConversationKey,
        through: TurnPosition,
        *,
        expected_version: int,
        expected_recorded: int,
    ) -> bool:
        self._interruption.reached("claim")
        return super().claim(
            key, through, expected_version=expected_version, expected_recorded=expected_recorded
        )

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
    ) -> bool:
        self._interruption.reached("commit")
        return super().commit_fold(
            key,
            fold,
            watermark=watermark,
            late_passed=late_passed,
            expected_version=expected_version,
            passed_tokens=passed_tokens,
            passed_turns=passed_turns,
        )


class InterruptibleSummariser:
    """The offline summariser, interrupted as it is called."""

    def __init__(self, interruption: Interruption) -> None:
        self._interruption = interruption
        self._summariser = OfflineSummariser()

    def summarise(self, previous: str | None, turns: Sequence[Turn], max_tokens: int) -> Summary:
        self._interruption.reached("summarise")
        return self._summariser.summarise(previous, turns, max_tokens)


def _position(turn: RefTurn) -> TurnPosition:
    return TurnPosition(turn.sent_at, turn.recorded_at, turn.id)


def instant(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def texts_of(message: dict[str, Any]) -> str:
    blocks = message["content"]
    assert len(blocks) == 1, blocks
    assert set(blocks[0]) == {"text"}, blocks
    text = blocks[0]["text"]
    assert isinstance(text, str)
    return text


def blocks_of(message: dict[str, Any]) -> list[str]:
    """A history message's text blocks: its turn's, and the exchange's marker after a question."""
    blocks = message["content"]
    assert all(set(block) == {"text"} for block in blocks), blocks
    return [block["text"] for block in blocks]


class MemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.wall = START
        self.last_sent: datetime | None = None
        self.interruption = Interruption()
        self.store = InterruptibleStore(
            self.interruption, turn_retention_days=LIMITS.retention_days, clock=self._clock
        )
        self.queue = CollectingQueue()
        self.observed = Observed()
        self.tenants = OneTenant()
        self.service = ConverseService(
            store=self.store,
            queue=self.queue,  # type: ignore[arg-type]
            rules=self.tenants,
            settings=SETTINGS,
            telemetry=self.observed,
            clock=self._clock,
            sleep=lambda _: None,
        )
        self.compactor = Compactor(
            store=self.store,
            summariser=InterruptibleSummariser(self.interruption),
            settings=SETTINGS,
            telemetry=self.observed,
            wall_clock=self._clock,
        )
        self.export = TurnsExport(store=self.store, rules=self.tenants)
        self.ref = ReferenceConversation(LIMITS)
        self.contact_ids: list[str] = []
        self.reply_ids: list[str] = []
        self.erased_turns: dict[str, RefTurn] = {}
        """The turns of the conversations erased so far, by id, in the order they were erased
        (one sent again leaves)."""
        self.erased_tags: set[str] = set()
        """The serials of the erased turns' texts: none may be served again."""
        self.serial = 0
        self.steps = 0

    def _clock(self) -> float:
        return self.wall.timestamp()

    # -- helpers ---------------------------------------------------------------------

    def _next_instant(self, tick: timedelta) -> datetime:
        """sentAt strictly after the last message; a jump since then keeps its exact gap."""
        if self.last_sent is not None and self.wall <= self.last_sent:
            self.wall = self.last_sent + tick
        self.last_sent = self.wall
        return self.wall

    def _arrive(self) -> None:
        """A call reaches the service a microsecond after the last one: the clock moves."""
        self.wall += timedelta(microseconds=1)

    def _text(self, size: int, fill: str) -> str:
        self.serial += 1
        return (f"<{self.serial}>" + fill * size)[:size]

    def _after_the_erase(self, recorded_at: datetime) -> bool:
        fence = self.ref.erased_at
        return fence is None or recorded_at > fence

    def _stored(self) -> list[tuple[str, str, str, datetime, int]]:
        """The turns stored since the latest erase (the erased ones may still wait for their
        deletion), as (id, role, text, sentAt, tokens), in position order."""
        conversation = self.store._conversations.get(KEY)
        if conversation is None:
            return []
        rows: list[tuple[str, str, str, datetime, int]] = []
        for position in conversation.positions:
            if not self._after_the_erase(position.recorded_at):
                continue
            stored = conversation.turns[position]
            turn = stored.turn
            assert position == turn.position
            rows.append(
                (turn.id, turn.role, texts_of(turn.as_message()), turn.sent_at, stored.tokens)
            )
        return rows

    def _stored_ids(self) -> set[str]:
        return {row[0] for row in self._stored()}

    def _new_id(self, before: set[str]) -> str:
        new = self._stored_ids() - before
        assert len(new) == 1, f"one call stored {len(new)} turns"
        return new.pop()

    def _compact_once(self) -> None:
        before = self._stored()
        result = self.compactor.compact(KEY)
        self._compacted(result.turns_folded, result.outcome, before)

    def _compacted(
        self, turns_folded: int, outcome: Outcome, before: list[tuple[Any, ...]]
    ) -> None:
        """A compaction ran whole: the reference's runs too, and they agree."""
        folded = self.ref.compact(self.wall)
        assert turns_folded == folded
        assert outcome == (Outcome.FOLDED if folded else Outcome.NOTHING_TO_FOLD)
        # Compaction never deletes or edits a turn.
        assert self._stored() == before

    def _covered(self, erased_at: datetime, folds_below: int) -> list[str]:
        """The items a fence covers that are still stored: its deletion's part."""
        conversation = self.store._conversations.get(KEY)
        if conversation is None:
            return []
        keys = [turn_sort_key(p) for p in conversation.positions if p.recorded_at <= erased_at]
        keys += [
            marker_sort_key(turn_id)
            for turn_id, marker in conversation.markers.items()
            if marker.position.recorded_at <= erased_at
        ]
        keys += [fold_sort_key(version) for version in conversation.folds if version < folds_below]
        if conversation.served is not None and conversation.served < folds_below:
            keys.append(MEMORY_SK)
        return sorted(keys)

    def _erase(self, budget: int) -> list[str]:
        """The contact erased (SPEC 10), `budget` items deleted at most before the rest is
        queued; the reference starts anew. The store's item keys right after."""
        before = self.store.item_keys(KEY)
        live = self._stored()
        queued = len(self.queue.erasures)
        self._arrive()
        deletion = ErasureDeletion(
            store=self.store,
            queue=self.queue,
            telemetry=self.observed,
            items_per_invocation=budget,
        )
        erasure = ContactErasure(
            store=self.store,
            rules=self.tenants,
            deletion=deletion,
            telemetry=self.observed,
            clock=self._clock,
        ).erase(TENANT, CONTACT, CALLER)
        erased = list(self.ref.turns)
        fence = self.ref.erase(self.wall)
        after = self.store.item_keys(KEY)
        assert self.observed.erased[-1] == (erasure.items, erasure.complete)
        assert erasure.status == (200 if erasure.complete else 202)
        if fence is None:  # nothing was ever stored
            assert (erasure.items, erasure.complete, erasure.erased_at) == (0, True, self.wall)
            assert before == after == []
            return after
        assert erasure.erased_at == fence
        fenced_now = fence == self.wall  # else the fence of an erase with nothing since
        assert fenced_now == bool(erased) == bool(live)
        # Deleted: what the fence covers, up to the budget, and the state (replaced) once.
        assert set(after) <= set(before)
        assert STATE_SK in after
        assert erasure.items == len(before) - len(after) + int(fenced_now)
        assert erasure.items - int(fenced_now) <= budget
        assert erasure.complete == (after == [STATE_SK])
        assert erasure.complete == (not self._covered(fence, self.ref.compactions))
        assert len(self.queue.erasures) - queued == int(not erasure.complete)
        if not erasure.complete:
            key, queued_fence = self.queue.erasures[-1]
            assert key == KEY
            assert (queued_fence.erased_at, queued_fence.folds_below) == (
                fence,
                self.ref.compactions,
            )
        # The erased conversation's ids are forgotten: each is a new message if sent again.
        for turn in erased:
            self.erased_turns[turn.id] = turn
            tag = TAG.match(turn.text)
            if tag:
                self.erased_tags.add(tag.group())
        self.contact_ids.clear()
        self.reply_ids.clear()
        return after

    def _never_erased(self, text: str) -> None:
        """No text of an erased turn is served again (each holds its serial, if long enough)."""
        served = set(TAG.findall(text)) & self.erased_tags
        assert not served, f"erased turns served again: {sorted(served)}"

    # -- rules -----------------------------------------------------------------------

    @rule(size=SIZES, fill=FILLS, tick=TICKS, given_id=st.booleans())
    def converse(self, size: int, fill: str, tick: timedelta, given_id: bool) -> None:
        self.steps += 1
        self._converse(self._next_instant(tick), self._text(size, fill), given_id)

    @precondition(lambda self: self.ref.last_contact is not None)
    @rule(size=SIZES, fill=FILLS, just_below=st.booleans())
    def converse_at_the_idle_boundary(self, size: int, fill: str, just_below: bool) -> None:
        """A contact's message exactly idleResetHours (or a second less) after their last one."""
        self.steps += 1
        last = self.ref.last_contact
        assert last is not None
        at = last + IDLE - timedelta(seconds=1 if just_below else 0)
        if (self.last_sent is None or at > self.last_sent) and at >= self.wall:
            self.wall = self.last_sent = at
            self._converse(at, self._text(size, fill), given_id=True)

    @rule(size=SIZES, fill=FILLS, late=LATENESS)
    def converse_late(self, size: int, fill: str, late: timedelta) -> None:
        """A contact's message delivered late: its sentAt is older than the newest turn's."""
        self.steps += 1
        self._converse(self.wall - late - HALF_SECOND, self._text(size, fill), given_id=True)

    def _converse(
        self, sent_at: datetime, text: str, given_id: bool, turn_id: str | None = None
    ) -> None:
        turn_id = turn_id or (f"q{self.serial}" if given_id else None)
        before = self._stored_ids()
        gaps, queued = len(self.observed.gaps), len(self.queue.requests)
        self._arrive()
        answer = self.service.converse(
            TENANT, CONTACT, Incoming(turn_id, "user", [{"text": text}], sent_at), CALLER
        )
        stored_id = self._new_id(before)
        if turn_id is not None:
            assert stored_id == turn_id
            self.contact_ids.append(turn_id)
        turn = self.ref.placed(RefTurn(stored_id, "user", text, sent_at, self.wall))
        expected = self.ref.contact(turn, self.wall)
        assert answer["turnCount"] == expected.turn_count
        assert answer["decision"] == expected.decision
        assert answer["current"] == {"role": "user", "content": [{"text": text}]}
        if expected.window is None:
            assert answer["reason"] == "turn_cap"
            assert not answer.get("history")
            assert not answer.get("converse")
        else:
            assert answer["reason"] is None
            self._check_window(answer, expected.window, text)
            assert answer["window"]["dropped"] == expected.dropped
            self._check_memory(answer["memory"], expected.memory)
        # Coverage (SPEC 5.7): a turn held by neither the window nor the fold is reported,
        # and nothing is reported when every candidate is held.
        reported = len(self.observed.gaps) > gaps
        assert reported == expected.gap, (reported, expected.gap)
        # The compaction trigger (SPEC 5.8): one request when due and no lease is in flight.
        assert len(self.queue.requests) - queued == int(expected.enqueued)
        self.ref.remember_first(turn, expected, answer)

    @precondition(lambda self: self.contact_ids)
    @rule(pick=st.integers(0, 10_000), original_time=st.booleans())
    def retry(self, pick: int, original_time: bool) -> None:
        self.steps += 1
        turn_id = self.contact_ids[pick % len(self.contact_ids)]
        original = self.ref.first_answers[turn_id].turn
        sent_at = original.sent_at if original_time else self.wall
        before = self._stored()
        gaps, queued = len(self.observed.gaps), len(self.queue.requests)
        answer = self.service.converse(
            TENANT, CONTACT, Incoming(turn_id, "user", [{"text": original.text}], sent_at), CALLER
        )
        first, window, memory = self.ref.replay(turn_id, self.wall)
        assert answer["turnCount"] == first.turn_count
        assert answer["decision"] == first.decision
        assert answer["current"] == {"role": "user", "content": [{"text": original.text}]}
        if window is None:
            assert not answer.get("history")
        else:
            self._check_window(answer, window, original.text)
            assert answer["window"]["dropped"] == first.dropped
            self._check_memory(answer["memory"], memory)
            if tuple(t.id for t in window.candidates) == first.candidate_ids:
                assert answer["history"] == first.history
        assert self._stored() == before
        assert len(self.observed.gaps) == gaps
        assert len(self.queue.requests) == queued

    @precondition(lambda self: self.contact_ids or self.reply_ids)
    @rule(pick=st.integers(0, 10_000), via=st.sampled_from(["converse", "record"]))
    def reuse_id_with_other_content(self, pick: int, via: str) -> None:
        self.steps += 1
        ids = self.contact_ids + self.reply_ids
        turn_id = ids[pick % len(ids)]
        original = next(t for t in self.ref.turns if t.id == turn_id)
        role: Role = "user" if via == "converse" else "assistant"
        # The same words under the other role are other content too (the role is part of it).
        text = original.text if original.role != role else original.text + "?"
        before = self._stored()
        queued = len(self.queue.requests)
        call = self.service.converse if via == "converse" else self.service.record
        with pytest.raises(ApiError) as refused:
            call(TENANT, CONTACT, Incoming(turn_id, role, [{"text": text}], self.wall), CALLER)
        assert (refused.value.status, refused.value.code) == (409, "id_reused")
        assert self._stored() == before
        assert len(self.queue.requests) == queued

    @rule(size=SIZES, fill=FILLS, tick=TICKS, given_id=st.booleans())
    def reply(self, size: int, fill: str, tick: timedelta, given_id: bool) -> None:
        self.steps += 1
        self._reply(self._next_instant(tick), self._text(size, fill), given_id)

    @rule(size=SIZES, fill=FILLS, late=LATENESS)
    def reply_late(self, size: int, fill: str, late: timedelta) -> None:
        """A reply recorded late (a person's answer after an escalation, say)."""
        self.steps += 1
        self._reply(self.wall - late - HALF_SECOND, self._text(size, fill), given_id=True)

    def _reply(
        self, sent_at: datetime, text: str, given_id: bool, turn_id: str | None = None
    ) -> None:
        turn_id = turn_id or (f"a{self.serial}" if given_id else None)
        before = self._stored_ids()
        queued = len(self.queue.requests)
        self._arrive()
        answer = self.service.record(
            TENANT, CONTACT, Incoming(turn_id, "assistant", [{"text": text}], sent_at), CALLER
        )
        stored_id = self._new_id(before)
        if turn_id is not None:
            assert stored_id == turn_id
            self.reply_ids.append(turn_id)
        turn = self.ref.placed(RefTurn(stored_id, "assistant", text, sent_at, self.wall))
        assert answer["turn"] == {
            "role": "assistant",
            "content": [{"text": text}],
            "id": stored_id,
            "sentAt": instant(turn.sent_at),
        }
        assert len(self.queue.requests) == queued
        self.ref.reply(turn, self.wall)

    @precondition(lambda self: self.last_sent is not None)
    @rule(size=SIZES, fill=FILLS)
    def reply_stamped_in_the_same_instant(self, size: int, fill: str) -> None:
        """A reply with its question's very `sentAt` (timestamps to the second, say) and an
        id that sorts first: it still follows the question, recorded before it."""
        self.steps += 1
        assert self.last_sent is not None
        text = self._text(size, fill)
        self._reply(self.last_sent, text, given_id=True, turn_id=f"0{self.serial}")

    @precondition(lambda self: self.reply_ids)
    @rule(pick=st.integers(0, 10_000), original_time=st.booleans())
    def retry_reply(self, pick: int, original_time: bool) -> None:
        self.steps += 1
        turn_id = self.reply_ids[pick % len(self.reply_ids)]
        original = next(t for t in self.ref.turns if t.id == turn_id)
        sent_at = original.sent_at if original_time else self.wall
        before = self._stored()
        answer = self.service.record(
            TENANT,
            CONTACT,
            Incoming(turn_id, "assistant", [{"text": original.text}], sent_at),
            CALLER,
        )
        assert answer["turn"]["sentAt"] == instant(original.sent_at)
        assert answer["turn"]["id"] == turn_id
        assert self._stored() == before

    @rule()
    def compact_now(self) -> None:
        """A compaction whether or not one was asked for (a duplicate or stray delivery)."""
        self.steps += 1
        self._compact_once()

    @precondition(lambda self: self.queue.requests)
    @rule()
    def deliver_queued_compactions(self) -> None:
        self.steps += 1
        requests, self.queue.requests = self.queue.requests, []
        for key in requests:
            assert key == KEY
            self._compact_once()

    @rule(jump=JUMPS)
    def advance_clock(self, jump: timedelta) -> None:
        self.steps += 1
        if self.wall + jump <= REAL_NOW:
            self.wall += jump

    @rule(ahead=st.integers(301, 86_400))
    def refuse_a_message_from_the_future(self, ahead: int) -> None:
        self.steps += 1
        before = self._stored()
        sent_at = self.wall + timedelta(seconds=ahead)
        with pytest.raises(ApiError) as refused:
            self.service.converse(
                TENANT, CONTACT, Incoming(None, "user", [{"text": "later"}], sent_at), CALLER
            )
        assert refused.value.status == 422
        assert self._stored() == before

    @rule(budget=BUDGETS)
    def erase(self, budget: int) -> None:
        """The contact erased: a new conversation from here on, even before the deletion
        of the old one finishes (a small budget leaves the rest queued)."""
        self.steps += 1
        self._erase(budget)

    @precondition(lambda self: self.queue.erasures)
    @rule(budget=BUDGETS)
    def deliver_erase_continuations(self, budget: int) -> None:
        """The rests of erases carried on from the queue (each queues its own rest again)."""
        self.steps += 1
        pending, self.queue.erasures = self.queue.erasures, []
        deletion = ErasureDeletion(
            store=self.store,
            queue=self.queue,
            telemetry=self.observed,
            items_per_invocation=budget,
        )
        for key, fence in pending:
            assert key == KEY
            before, live = self.store.item_keys(KEY), self._stored()
            deleted = deletion.carry_on(key, fence)
            after = self.store.item_keys(KEY)
            assert self.observed.erasures_continued[-1] == (deleted.items, deleted.complete)
            assert set(after) <= set(before)
            assert deleted.items == len(before) - len(after) <= budget
            assert deleted.complete == (not self._covered(fence.erased_at, fence.folds_below))
            assert (self.queue.erasures[-1:] == [(key, fence)]) != deleted.complete
            # What followed the erase stays.
            assert self._stored() == live
            assert STATE_SK in after

    @rule(stage=STAGES, budget=BUDGETS)
    def erase_during_a_compaction(self, stage: str, budget: int) -> None:
        """A compaction that read the conversation before an erase and goes on after it
        (the erase comes as it claims, summarises or commits) writes nothing back: its claim
        fails and it finds nothing left, or its commit fails."""
        self.steps += 1
        before = self._stored()
        erased: list[list[str]] = []
        self.interruption.arm(stage, lambda: erased.append(self._erase(budget)))
        try:
            result = self.compactor.compact(KEY)
        finally:
            self.interruption.disarm()
        if not erased:
            # It never got that far (nothing to claim, or to summarise): it ran whole, and
            # the erase follows it.
            self._compacted(result.turns_folded, result.outcome, before)
            self._erase(budget)
            return
        assert result.turns_folded == 0
        expected = Outcome.NOTHING_TO_FOLD if stage == "claim" else Outcome.LOST_RACE
        assert result.outcome is expected, (stage, result.outcome)
        # Nothing written: the store holds what the erase left (its state, its rest).
        assert self.store.item_keys(KEY) == erased[0]

    @precondition(lambda self: self.erased_turns)
    @rule(
        pick=st.integers(0, 10_000),
        via=st.sampled_from(["converse", "record"]),
        same_words=st.booleans(),
        original_time=st.booleans(),
        size=SIZES,
        fill=FILLS,
        tick=TICKS,
    )
    def send_an_erased_id_again(
        self,
        *,
        pick: int,
        via: str,
        same_words: bool,
        original_time: bool,
        size: int,
        fill: str,
        tick: timedelta,
    ) -> None:
        """An id of an erased conversation sent again, with its words (a retry, say) or
        others, as a question or a reply: a new message, never a replay nor refused."""
        self.steps += 1
        # In the order they were erased: never by id, which the service may have generated
        # at random, and the pick would not replay.
        ids = list(self.erased_turns)
        old = self.erased_turns.pop(ids[pick % len(ids)])
        if same_words:
            text = old.text
            tag = TAG.match(text)
            if tag:
                self.erased_tags.discard(tag.group())  # the new message's words now
        else:
            text = self._text(size, fill)
        # Its first time, if not so old that it would be past its TTL on arrival.
        recent = self.wall - old.sent_at < timedelta(days=LIMITS.retention_days - 1)
        sent_at = old.sent_at if original_time and recent else self._next_instant(tick)
        if via == "converse":
            self._converse(sent_at, text, given_id=True, turn_id=old.id)
        else:
            self._reply(sent_at, text, given_id=True, turn_id=old.id)

    # -- per-answer checks -----------------------------------------------------------

    def _check_window(self, answer: dict[str, Any], expected: ExpectedWindow, current: str) -> None:
        history = answer["history"]
        blocks = [blocks_of(message) for message in history]
        for text in (text for b in blocks for text in b):
            self._never_erased(text)
        # Structure, read off the answer alone.
        assert len(history) <= LIMITS.window_messages
        if history:
            assert history[0]["role"] == "user", "the window starts on the contact's side"
        assert answer["window"]["estimatedTokens"] == sum(tokens("".join(b)) for b in blocks)
        # The window is exactly the reference's: the newest run of whole exchanges in range,
        # or the long exchange's question, its marker and its newest part (SPEC 5.5.7).
        assert [(m["role"], b) for m, b in zip(history, blocks, strict=True)] == expected.messages
        assert answer["window"]["kept"] == len(expected.turns)
        assert answer["window"]["trimmed"] == expected.trimmed
        assert answer["window"]["estimatedTokens"] == expected.estimated_tokens
        assert answer["window"]["repaired"] == 0
        # The Converse fragment: history then the current message, roles alternating.
        messages = answer["converse"]["messages"]
        assert messages[0]["role"] == "user"
        assert all(a["role"] != b["role"] for a, b in pairwise(messages))
        flat = [
            block["text"]
            for message in messages
            for block in message["content"]
            if "cachePoint" not in block
        ]
        assert flat == [*(text for b in blocks for text in b), current]
        # The default cache points: after the memory, after the history (SPEC 5, caching).
        points = [b for m in messages for b in m["content"] if "cachePoint" in b]
        assert len(points) == (1 if history else 0)
        assert bool(answer["converse"]["system"]) == (answer["memory"] is not None)

    def _check_memory(self, memory: dict[str, Any] | None, expected: RefFold | None) -> None:
        if expected is None:
            assert memory is None
            return
        assert memory is not None
        self._never_erased(memory["summary"])
        assert memory["turnsFolded"] == expected.turns_folded
        assert memory["coversUntil"] == instant(expected.covers_until)
        assert memory["coversFrom"] == instant(expected.covers_from)
        assert tokens(memory["summary"]) <= LIMITS.summary_max_tokens

    # -- invariants ------------------------------------------------------------------

    @invariant()
    def every_turn_is_stored_once(self) -> None:
        expected = [(t.id, t.role, t.text, t.sent_at, t.tokens) for t in self.ref.turns]
        assert self._stored() == expected
        conversation = self.store._conversations.get(KEY)
        markers = {
            turn_id
            for turn_id, marker in (conversation.markers.items() if conversation else ())
            if self._after_the_erase(marker.position.recorded_at)
        }
        assert markers == {t.id for t in self.ref.turns}

    @invariant()
    def the_store_holds_only_what_followed_the_latest_erase(self) -> None:
        """Once no erase's deletion is pending, the store holds the items of the turns
        recorded since the latest erase (the turn, its id's marker), the memories written
        since (their kept copies), the state, and nothing else; while one is pending, what
        else it holds is what an erase covers."""
        keys = self.store.item_keys(KEY)
        expected = [turn_sort_key(_position(t)) for t in self.ref.turns]
        expected += [marker_sort_key(t.id) for t in self.ref.turns]
        expected += [fold_sort_key(version) for version in self.ref.fold_versions]
        expected += [MEMORY_SK] if self.ref.fold_versions else []  # the memory served
        expected += [STATE_SK] if self.ref.state_written else []
        if not self.queue.erasures:
            assert keys == sorted(expected)
            return
        assert set(expected) <= set(keys)
        fence = self.ref.erased_at
        assert fence is not None
        left = set(self._covered(fence, self.ref.compactions))
        assert set(keys) - set(expected) <= left

    @invariant()
    def the_export_serves_the_turns_since_the_latest_erase(self) -> None:
        """SPEC 10's export: every retained turn since the latest erase, exactly as recorded,
        oldest first, page after page; 404 when nothing was recorded since."""
        if not self.ref.turns:
            with pytest.raises(ApiError) as refused:
                self.export.page(TENANT, CONTACT, CALLER, limit=EXPORT_PAGE, cursor=None)
            assert refused.value.status == 404
            return
        exported: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self.export.page(TENANT, CONTACT, CALLER, limit=EXPORT_PAGE, cursor=cursor)
            assert len(page["turns"]) <= EXPORT_PAGE
            exported += page["turns"]
            cursor = page["nextCursor"]
            if cursor is None:
                break
            assert len(page["turns"]) == EXPORT_PAGE
        retained = [t for t in self.ref.turns if not self.ref.expired(t.sent_at, self.wall)]
        assert [
            (
                e["id"],
                e["role"],
                e["content"],
                e["sentAt"],
                e["recordedAt"],
                e.get("statedSentAt"),
            )
            for e in exported
        ] == [
            (
                t.id,
                t.role,
                [{"text": t.text}],
                instant(t.sent_at),
                instant(t.recorded_at),
                instant(t.stated_sent_at) if t.stated_sent_at else None,
            )
            for t in retained
        ]
        for e in exported:
            self._never_erased(texts_of(e))

    @invariant()
    def state_agrees_with_the_reference(self) -> None:
        state = self.store.state(KEY)
        if not self.ref.state_written:
            assert state is None
            return
        assert state is not None
        assert state.erased_at == self.ref.erased_at
        assert state.streak.count == self.ref.streak_count
        assert state.streak.last_contact_at == self.ref.last_contact
        assert state.version == self.ref.contact_commits
        assert state.turns_recorded == len(self.ref.turns)
        lease = state.lease_until
        assert (int(lease.timestamp()) if lease else None) == self.ref.lease_until
        assert (tuple(state.watermark) if state.watermark else None) == self.ref.watermark
        assert state.compaction_version == self.ref.compactions
        assert state.folding_through is None, "a claim outlived its compaction"
        fold, ref_fold = state.fold, self.ref.fold
        if ref_fold is None:
            assert fold is None
        else:
            assert fold is not None
            assert fold.turns_folded == ref_fold.turns_folded
            assert fold.covers_from == ref_fold.covers_from
            assert fold.covers_until == ref_fold.covers_until
            assert tokens(fold.summary) <= LIMITS.summary_max_tokens
        # What the counters hold: every recorded turn less what was folded.
        assert state.unfolded_tokens == self.ref.counter_tokens
        assert state.unfolded_turns == self.ref.counter_turns

    @invariant()
    def the_fold_and_the_counters_split_the_conversation_at_the_watermark(self) -> None:
        """The watermark splits the conversation: folded below, counted above.

        At or below the watermark a turn is folded, or was passed over with
        its TTL gone (skipped), or waits on the late list; the counters hold
        the turns above it and the late ones, nothing else.
        """
        if not self.ref.turns:
            return
        state = self.store.state(KEY)
        assert state is not None
        above = self.ref.above_watermark()
        late = [t for t in self.ref.turns if t.id in self.ref.late]
        by_id = {t.id: t for t in late}
        assert [tuple(e.position) for e in state.late_turns] == [
            by_id[turn_id].position for turn_id in self.ref.late
        ]
        assert state.unfolded_turns == len(above) + len(late)
        assert state.unfolded_tokens == sum(t.tokens for t in above + late)
        below = {t.id for t in self.ref.at_or_below_watermark()}
        assert below == self.ref.folded | self.ref.skipped | set(self.ref.late)
        assert not self.ref.folded & self.ref.skipped
        # The fold counts what it folded since it started: a memory that outlived its
        # retention is not extended, a new one starts (so it may count fewer than all).
        assert (state.fold.turns_folded if state.fold else 0) <= len(self.ref.folded)

    @invariant()
    def the_memory_route_agrees(self) -> None:
        view = self.service.memory(TENANT, CONTACT, CALLER)
        if not self.ref.turns:
            assert view is None
            return
        assert view is not None
        assert view["counters"] == {
            "turnCount": self.ref.streak_count,
            "unfoldedTokens": self.ref.counter_tokens,
            "unfoldedTurns": self.ref.counter_turns,
            "turnsRecorded": len(self.ref.turns),
            "lateTurns": len(self.ref.late),
            "compactionInFlight": self.ref.lease_until is not None
            and self.ref.lease_until > self.wall.timestamp(),
        }
        self._check_memory(
            view["memory"], self.ref.served(self.ref.fold, self.ref.cutoff(self.wall))
        )

    def teardown(self) -> None:
        tally("Stateful model (hypothesis)", inputs_tried=self.steps)


MemoryMachine.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None
)
TestMemory = MemoryMachine.TestCase


# -- sequences the machine found, replayed (each a bug fixed since) ----------------------


def _say(world: MemoryMachine, turn_id: str, text: str, at: datetime) -> dict[str, Any]:
    world.wall = at
    message = Incoming(turn_id, "user", [{"text": text}], at)
    return world.service.converse(TENANT, CONTACT, message, CALLER)


def _reply(world: MemoryMachine, turn_id: str, text: str, at: datetime, wall: datetime) -> None:
    world.wall = wall
    message = Incoming(turn_id, "assistant", [{"text": text}], at)
    world.service.record(TENANT, CONTACT, message, CALLER)


# Found by this machine: a turn whose TTL passed before it was folded was skipped by the
# compactor, but its tokens and its turn stayed in the unfolded counters for good, so the
# turn trigger fired earlier and earlier. The compactor now passes over it: the counters
# and the watermark move past it.


def test_a_turn_that_expires_unfolded_leaves_the_unfolded_counters_with_compaction() -> None:
    world = MemoryMachine()
    start = world.wall
    _say(world, "x", "x", start)  # 1 turn, 1 token: below both compaction triggers
    _say(world, "y", "y", start + timedelta(days=59))
    _say(world, "z", "z", start + timedelta(days=61))  # x is now past its 60-day TTL
    _say(world, "w", "w", start + timedelta(days=61, minutes=1))  # 4 unfolded turns: due
    assert world.queue.requests == [KEY]
    world.compactor.compact(KEY)
    state = world.store.state(KEY)
    assert state is not None
    assert state.fold is not None
    assert state.fold.turns_folded == 3  # y, z, w: x is gone
    # Nothing is left above the watermark, and x will never be folded.
    assert (state.unfolded_turns, state.unfolded_tokens) == (0, 0)


def test_a_backlog_only_of_expired_turns_moves_the_watermark_and_folds_nothing() -> None:
    world = MemoryMachine()
    start = world.wall
    _reply(world, "x", "x", start, start)
    world.wall = start + timedelta(days=61)  # x is past its 60-day TTL, the state is not
    _reply(world, "y", "y", start - timedelta(days=1), world.wall)  # late-filed, expired too
    assert world.compactor.compact(KEY).outcome is Outcome.NOTHING_TO_FOLD
    state = world.store.state(KEY)
    assert state is not None
    assert (state.fold, state.unfolded_turns, state.unfolded_tokens) == (None, 0, 0)
    assert state.watermark is not None
    assert state.watermark.turn_id == "x"


# Found by this machine: a late turn below the watermark was in neither the fold nor the
# window, yet the coverage check counted it as covered by its position, and no fold would
# ever take it. It now waits on the state's late list: reported as a gap while the window
# does not hold it, and folded by the next compaction.


def test_a_late_turn_below_the_watermark_is_reported_then_folded() -> None:
    world = MemoryMachine()
    start = world.wall
    big = "b" * 2000  # trimmed to 106 tokens in a window of 400
    for n in range(3):
        _say(world, f"q{n}", big, start + timedelta(minutes=4 * n))
        at = start + timedelta(minutes=4 * n + 2)
        _reply(world, f"a{n}", big, at, at)
    world.compactor.compact(KEY)  # the fold's watermark is a2
    late_at = start + timedelta(minutes=1)  # between q0 and a0: below the watermark
    _reply(world, "late", "the late reply", late_at, start + timedelta(minutes=11))
    gaps = len(world.observed.gaps)
    answer = _say(world, "q3", "and now?", start + timedelta(minutes=12))
    assert len(answer["history"]) == 4  # q1 a1 q2 a2: the late reply is not in the window
    state = world.store.state(KEY)
    assert state is not None
    assert state.fold is not None
    assert "the late reply" not in state.fold.summary  # and not in the fold
    assert len(world.observed.gaps) > gaps, "held by neither, and nothing was reported"
    assert world.observed.gaps[-1] == 1  # the late reply alone
    assert [e.position.turn_id for e in state.late_turns] == ["late"]
    # The next compaction folds it, and the conversation is whole again.
    world.compactor.compact(KEY)
    state = world.store.state(KEY)
    assert state is not None
    assert state.fold is not None
    assert "the late reply" in state.fold.summary
    assert (state.late_turns, state.unfolded_turns, state.fold.turns_folded) == ((), 0, 8)
    gaps = len(world.observed.gaps)
    _say(world, "q4", "still there?", start + timedelta(minutes=13))
    assert len(world.observed.gaps) == gaps


# Found by this machine and fixed meanwhile ("the state's TTL follows its latest write"):
# a late turn used to set the state's TTL from its own old sentAt, so the state read as
# new soon after. The two tests below keep the fix.


def test_a_late_turn_does_not_reset_the_turn_cap() -> None:
    world = MemoryMachine()
    start = world.wall
    for n in range(5):
        _say(world, f"q{n}", "hello", start + timedelta(minutes=n))
    # A reply recorded late: its sentAt is 60 days less 10 minutes before the last message.
    late_at = start + timedelta(minutes=4) - timedelta(days=60) + timedelta(minutes=10)
    _reply(world, "late", "a late reply", late_at, start + timedelta(minutes=5))
    answer = _say(world, "q5", "hello again", start + timedelta(minutes=15))
    # Six messages within 15 minutes, no idle gap: the sixth is over the cap of 5.
    assert (answer["decision"], answer["turnCount"]) == ("escalate", 6)


def test_a_late_turn_does_not_hide_the_fold() -> None:
    world = MemoryMachine()
    start = world.wall
    _say(world, "q0", "remember the order number 42", start)
    world.compactor.compact(KEY)
    _reply(world, "late", "a late reply", start - timedelta(days=59), start)
    answer = _say(world, "q1", "what was the number?", start + timedelta(hours=25))
    # The fold's newest turn is 25 hours old, within the 30 history days: it is served.
    assert answer["memory"] is not None


# Noticed while building this machine: turns with one `sentAt` were ordered by id, so a reply
# stamped in the same second as its question, with an id that sorts first, landed before the
# question, and the window dropped it as an answer with no question. Ties now go to arrival.


def test_a_reply_stamped_in_its_questions_second_follows_it_whatever_its_id() -> None:
    world = MemoryMachine()
    second = world.wall
    _say(world, "msg-2", "What is the fee?", second)
    _reply(world, "msg-1", "1,200 EUR.", second, second + timedelta(milliseconds=800))
    _say(world, "msg-3", "And the deadline?", second + timedelta(minutes=1))
    at = second + timedelta(minutes=1, seconds=1)
    _reply(world, "msg-4", "Friday.", at, at)
    gaps = len(world.observed.gaps)
    answer = _say(world, "msg-5", "Thanks.", second + timedelta(minutes=2))
    texts = [texts_of(message) for message in answer["history"]]
    assert texts == ["What is the fee?", "1,200 EUR.", "And the deadline?", "Friday."]
    assert len(world.observed.gaps) == gaps


# Found in review: a state past its TTL reads as new, but its item keeps the old fold until
# DynamoDB deletes it, days late. A message in that window revived the state, and the next
# compaction extended the old summary, serving turns past their retention to the model.


def test_a_memory_past_its_retention_is_not_extended_by_a_revived_conversation() -> None:
    world = MemoryMachine()
    start = world.wall
    _say(world, "q0", "remember the order number 42", start)
    world.compactor.compact(KEY)
    later = start + timedelta(days=LIMITS.retention_days + 1)  # turns and state expired
    answer = _say(world, "q1", "hello, a new topic", later)
    assert answer["memory"] is None
    world.compactor.compact(KEY)
    answer = _say(world, "q2", "and then?", later + timedelta(minutes=1))
    assert answer["memory"] is not None
    assert "order number" not in answer["memory"]["summary"]  # not "42": a time may hold it
    assert answer["memory"]["turnsFolded"] == 1  # q1 alone: a new memory
    assert answer["memory"]["coversFrom"] == instant(later)
