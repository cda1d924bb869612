"""A small reference model of one conversation, written from the spec (sections 3-6).

It is deliberately naive: plain lists of turns, indexes instead of lazy
readers, and every figure recomputed from scratch on each call. It imports
nothing from the code under test, so that the stateful test in
`tests/integration/test_stateful_memory.py` compares two independent
readings of the spec, not the code with itself.

Scope: text-only turns (`user` questions through converse, `assistant`
replies through the turns route), one conversation, turns in `sentAt` order
with the id breaking ties, late (out-of-order) turns included. Wall-clock
time (TTL, lease) is modelled in whole epoch seconds, as DynamoDB keeps it.

Where the code under test departs from the spec, the model follows the code
only through named sets (`skipped`, `late`: the turns no fold will ever
absorb), so the departure stays visible; the test module's xfail tests state
the spec's version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

MARKER = "… {} tokens omitted …"
TRIM_CONSTANT_TOKENS = 400
Position = tuple[datetime, str]


def tokens(text: str) -> int:
    """SPEC 4: ceil(characters / 4), over code points."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class Limits:
    """The settings and the one tenant's rules, as plain numbers."""

    window_tokens: int
    window_messages: int
    floor_messages: int
    message_max_tokens: int
    fold_min_tokens: int
    retention_days: int
    summary_max_tokens: int
    lease_seconds: int
    history_days: int
    idle_reset_hours: int
    max_turns: int

    @property
    def turn_trigger(self) -> int:
        """docs/decisions.md: unfolded turns reaching half the message cap also trigger."""
        return max(1, self.window_messages // 2)

    def trim(self, text: str) -> str:
        """SPEC 5.5.1 for one text block: head + exact marker on its own line + tail."""
        if tokens(text) <= self.message_max_tokens:
            return text
        head_chars = 4 * min(TRIM_CONSTANT_TOKENS, self.message_max_tokens // 2)
        tail_chars = 4 * min(TRIM_CONSTANT_TOKENS, self.message_max_tokens // 2)
        omitted = len(text) - head_chars - tail_chars
        if omitted <= 0:
            return text
        head = text[:head_chars]
        tail = text[len(text) - tail_chars :]
        return "\n".join(part for part in (head, MARKER.format((omitted + 3) // 4), tail) if part)


@dataclass(frozen=True)
class RefTurn:
    id: str
    role: str
    text: str
    sent_at: datetime

    @property
    def position(self) -> Position:
        return (self.sent_at, self.id)

    @property
    def tokens(self) -> int:
        return tokens(self.text)

    @property
    def is_question(self) -> bool:
        return self.role == "user" and bool(self.text)


@dataclass
class RefFold:
    watermark: Position
    turns_folded: int
    covers_from: datetime
    covers_until: datetime


@dataclass(frozen=True)
class Seen:
    """The conversation state as a converse call reads it (a state past its TTL reads as new)."""

    expired: bool
    streak_count: int
    last_contact: datetime | None
    unfolded_tokens: int
    unfolded_turns: int
    turns_recorded: int
    lease_until: int | None
    fold: RefFold | None


@dataclass(frozen=True)
class ExpectedWindow:
    turns: tuple[RefTurn, ...]
    """Oldest first, untrimmed (the originals)."""
    candidates: tuple[RefTurn, ...]
    """Every turn the window may take: before the current message, in range, alive."""
    since: datetime
    limits: Limits

    @property
    def texts(self) -> list[str]:
        return [self.limits.trim(t.text) for t in self.turns]

    @property
    def estimated_tokens(self) -> int:
        return sum(tokens(text) for text in self.texts)

    @property
    def trimmed(self) -> int:
        return sum(1 for t in self.turns if self.limits.trim(t.text) != t.text)

    def held_by_neither(self, watermark: Position | None) -> list[RefTurn]:
        kept = {t.id for t in self.turns}
        return [
            t
            for t in self.candidates
            if t.id not in kept and (watermark is None or t.position > watermark)
        ]


@dataclass(frozen=True)
class ExpectedAnswer:
    turn_count: int
    decision: str
    window: ExpectedWindow | None
    dropped: int | None
    memory: RefFold | None
    gap: bool
    enqueued: bool


@dataclass
class FirstAnswer:
    turn: RefTurn
    turn_count: int
    decision: str
    dropped: int | None
    history: list[dict[str, object]] | None
    candidate_ids: tuple[str, ...]


@dataclass
class ReferenceConversation:
    limits: Limits
    turns: list[RefTurn] = field(default_factory=list)
    """Every recorded turn, in position order."""
    folded: set[str] = field(default_factory=set)
    """The ids a compaction has summarised."""
    skipped: set[str] = field(default_factory=set)
    """Unfolded turns a compaction passed over because their TTL had passed."""
    late: set[str] = field(default_factory=set)
    """Turns recorded after a fold whose watermark was already newer than them."""
    fold: RefFold | None = None
    streak_count: int = 0
    last_contact: datetime | None = None
    contact_commits: int = 0
    lease_until: int | None = None
    first_answers: dict[str, FirstAnswer] = field(default_factory=dict)
    state_expiry: int | None = None
    """The state lives the retention past its latest write (or that turn's sentAt, if later):
    a late turn must not bring the expiry of the fold and the counters forward."""

    # -- clocks ------------------------------------------------------------------

    def expiry(self, sent_at: datetime) -> int:
        return int((sent_at + timedelta(days=self.limits.retention_days)).timestamp())

    def expired(self, sent_at: datetime, wall: datetime) -> bool:
        return self.expiry(sent_at) <= wall.timestamp()

    def cutoff(self, sent_at: datetime) -> datetime:
        return sent_at - timedelta(days=self.limits.history_days)

    # -- counters ----------------------------------------------------------------

    @property
    def recorded_tokens(self) -> int:
        return sum(t.tokens for t in self.turns)

    @property
    def counter_tokens(self) -> int:
        """What the state's counter holds: every recorded token less what was folded."""
        return self.recorded_tokens - sum(t.tokens for t in self.turns if t.id in self.folded)

    @property
    def counter_turns(self) -> int:
        return len(self.turns) - len(self.folded)

    def above_watermark(self) -> list[RefTurn]:
        mark = self.fold.watermark if self.fold else None
        return [t for t in self.turns if mark is None or t.position > mark]

    def at_or_below_watermark(self) -> list[RefTurn]:
        mark = self.fold.watermark if self.fold else None
        return [t for t in self.turns if mark is not None and t.position <= mark]

    def orphans(self) -> list[RefTurn]:
        """Turns at or below the watermark that no fold absorbed (and none ever will)."""
        return [t for t in self.at_or_below_watermark() if t.id not in self.folded]

    def _record(self, turn: RefTurn, wall: datetime) -> None:
        if self.fold is not None and turn.position < self.fold.watermark:
            self.late.add(turn.id)
        self.state_expiry = self.expiry(max(turn.sent_at, wall))
        self.turns.append(turn)
        self.turns.sort(key=lambda t: t.position)

    def seen(self, wall: datetime) -> Seen:
        if self.state_expiry is not None and self.state_expiry <= wall.timestamp():
            return Seen(True, 0, None, 0, 0, 0, None, None)
        return Seen(
            False,
            self.streak_count,
            self.last_contact,
            self.counter_tokens,
            self.counter_turns,
            len(self.turns),
            self.lease_until,
            self.fold,
        )

    # -- the window --------------------------------------------------------------

    def candidates(
        self, before: Position, current_sent_at: datetime, wall: datetime
    ) -> list[RefTurn]:
        since = self.cutoff(current_sent_at)
        return [
            t
            for t in self.turns
            if t.position < before and t.sent_at >= since and not self.expired(t.sent_at, wall)
        ]

    def window(self, candidates: list[RefTurn], since: datetime) -> ExpectedWindow:
        """SPEC 5.5 over indexes: floor, edge onto a question within the cap, whole exchanges."""
        lim = self.limits
        n = len(candidates)
        start = n
        intact = True
        if n:
            floor_start = max(0, n - lim.floor_messages)
            lowest = max(0, n - lim.window_messages)
            landing = [i for i in range(lowest, floor_start + 1) if candidates[i].is_question]
            if landing:
                start = max(landing)
            else:
                intact = False
                later = [i for i in range(floor_start, n) if candidates[i].is_question]
                start = min(later) if later else n
        if intact and start < n:
            used = sum(tokens(lim.trim(t.text)) for t in candidates[start:])
            while True:
                older = [i for i in range(start) if candidates[i].is_question]
                if not older:
                    break
                edge = max(older)
                cost = sum(tokens(lim.trim(t.text)) for t in candidates[edge:start])
                if n - edge > lim.window_messages or used + cost > lim.window_tokens:
                    break
                used += cost
                start = edge
        return ExpectedWindow(tuple(candidates[start:]), tuple(candidates), since, lim)

    def served(self, fold: RefFold | None, since: datetime) -> RefFold | None:
        """SPEC 5.6: the memory only if its newest covered turn is within historyDays."""
        if fold is None or fold.covers_until < since:
            return None
        return fold

    # -- the routes ---------------------------------------------------------------

    def contact(self, turn: RefTurn, wall: datetime) -> ExpectedAnswer:
        """A new contact message through converse: what it must answer; the model moves on."""
        seen = self.seen(wall)
        last = seen.last_contact
        idle = timedelta(hours=self.limits.idle_reset_hours)
        count = 1 if last is None or turn.sent_at - last >= idle else seen.streak_count + 1
        escalate = count > self.limits.max_turns
        window = None
        dropped = None
        gap = False
        if not escalate:
            since = self.cutoff(turn.sent_at)
            window = self.window(self.candidates(turn.position, turn.sent_at, wall), since)
            dropped = seen.turns_recorded - len(window.turns)
            gap = bool(window.held_by_neither(seen.fold.watermark if seen.fold else None))
        memory = self.served(seen.fold, self.cutoff(turn.sent_at))
        in_flight = seen.lease_until is not None and seen.lease_until > wall.timestamp()
        due = (
            seen.unfolded_tokens + turn.tokens >= self.limits.fold_min_tokens
            or seen.unfolded_turns + 1 >= self.limits.turn_trigger
        )
        enqueued = due and not in_flight
        # The state change.
        self._record(turn, wall)
        self.streak_count = count
        self.last_contact = turn.sent_at if last is None else max(last, turn.sent_at)
        self.contact_commits += 1
        if enqueued:
            self.lease_until = int(wall.timestamp()) + self.limits.lease_seconds
        decision = "escalate" if escalate else "model"
        return ExpectedAnswer(count, decision, window, dropped, memory, gap, enqueued)

    def remember_first(
        self, turn: RefTurn, expected: ExpectedAnswer, answer: dict[str, object]
    ) -> None:
        history = answer.get("history")
        window = answer.get("window")
        self.first_answers[turn.id] = FirstAnswer(
            turn=turn,
            turn_count=expected.turn_count,
            decision=expected.decision,
            # What the first call answered (checked against the model by the caller).
            dropped=window.get("dropped") if isinstance(window, dict) else None,
            history=history if isinstance(history, list) else None,
            candidate_ids=tuple(t.id for t in expected.window.candidates)
            if expected.window
            else (),
        )

    def replay(
        self, turn_id: str, wall: datetime
    ) -> tuple[FirstAnswer, ExpectedWindow | None, RefFold | None]:
        """A retry: the first answer's count and decision, the window as of the first position."""
        first = self.first_answers[turn_id]
        if first.decision == "escalate":
            return first, None, None
        original = first.turn
        since = self.cutoff(original.sent_at)
        window = self.window(self.candidates(original.position, original.sent_at, wall), since)
        memory = self.served(self.seen(wall).fold, self.cutoff(original.sent_at))
        return first, window, memory

    def reply(self, turn: RefTurn, wall: datetime) -> None:
        self._record(turn, wall)

    def compact(self, wall: datetime) -> int:
        """SPEC 6: fold the live turns newer than the watermark, oldest first; the count folded."""
        if not self.turns:
            return 0
        newer = self.above_watermark()
        live = [t for t in newer if not self.expired(t.sent_at, wall)][:500]
        self.lease_until = None
        if not live:
            return 0
        mark = live[-1].position
        self.skipped |= {t.id for t in newer if t not in live and t.position < mark}
        self.folded |= {t.id for t in live}
        self.fold = RefFold(
            watermark=live[-1].position,
            turns_folded=(self.fold.turns_folded if self.fold else 0) + len(live),
            covers_from=self.fold.covers_from if self.fold else live[0].sent_at,
            covers_until=live[-1].sent_at,
        )
        return len(live)
