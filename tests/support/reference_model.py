"""A small reference model of one conversation, written from the spec (sections 3-6, 10).

It is deliberately naive: plain lists of turns, indexes instead of lazy
readers, and every figure recomputed from scratch on each call. It imports
nothing from the code under test, so that the stateful test in
`tests/integration/test_stateful_memory.py` compares two independent
readings of the spec, not the code with itself.

Scope: text-only turns (`user` questions through converse, `assistant`
replies through the turns route), one conversation, turns in `sentAt` order
with the arrival, then the id, breaking ties, late (out-of-order) turns
included. Wall-clock
time (TTL, lease) is modelled in whole epoch seconds, as DynamoDB keeps it.

Two kinds of turn take another path, each kept in a named collection so
that the figures they move stay visible: `skipped` (its TTL passed before
compaction reached it: passed over, never folded, the counters and the
watermark move past it) and `late` (recorded after compaction had passed its
position: it waits on the late list, held by neither the fold nor, once old
enough, the window, until the next compaction folds it; docs/decisions.md,
"late turns").

An erase (SPEC 10) starts the conversation anew: no turns, no memory, no
streak, the counters at zero and every id forgotten (sent again, it is a new
message), and a turn recorded in the new conversation is placed after the
erase's fence (at its next instant, the `sentAt` it gave kept as its stated
one) if it was sent at or before it. What the store still holds of the erased conversation until its
deletion finishes is the test's to check, not the model's: the model keeps
only the fence (`erased_at`) and what the state item's versions moved by.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

MARKER = "… {} tokens omitted …"
EXCHANGE_MARKER = "… {} messages of this exchange omitted …"
NO_QUESTION_MARKER = "… the question that opened this exchange is not in the history …"
TRIM_CONSTANT_TOKENS = 400
INSTANT = timedelta(microseconds=1)
"""The finest step of a stored instant: an erase's fence, and the first instant after it."""
Position = tuple[datetime, datetime, str]
"""`sentAt`, then the arrival (the service's clock when it was recorded), then the id."""


UNITS_PER_TOKEN = 64
UNITS = {"é": 153, "😀": 133}
"""What a character costs, in 64ths of a token, for the model's alphabet (docs/decisions.md,
the estimate by kind of character): an ASCII letter 13, a digit 32, a space 1, JSON's
punctuation `"{}[]:,` and a control character 16, any other ASCII mark 64; general
punctuation (the markers' `…`, the summaries' `–`) 15; `é` (a Latin-1 letter) 153, an
emoji 133. The model knows no other character."""


def _ascii_units(character: str) -> int:
    if character.isalpha():
        return 13
    if character.isdigit():
        return 32
    if character == " ":
        return 1
    if character in '"{}[]:,' or not character.isprintable():
        return 16
    return 64


def units(text: str) -> int:
    return sum(
        _ascii_units(character)
        if character.isascii()
        else 15
        if "\u2000" <= character <= "\u206f"
        else UNITS[character]
        for character in text
    )


def tokens(text: str) -> int:
    """The estimate: the characters' costs added, rounded up to whole tokens."""
    return -(-units(text) // UNITS_PER_TOKEN)


def _longest_within(text: str, budget: int) -> int:
    """How many of `text`'s first characters cost at most `budget` units."""
    spent = 0
    for count, character in enumerate(text):
        spent += units(character)
        if spent > budget:
            return count
    return len(text)


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
    def lifetime_days(self) -> int:
        """docs/decisions.md, "the retention edge": `historyDays` past the last to see it."""
        return max(self.retention_days, 2 * self.history_days)

    @property
    def turn_trigger(self) -> int:
        """docs/decisions.md: unfolded turns reaching half the message cap also trigger."""
        return max(1, self.window_messages // 2)

    def trim(self, text: str) -> str:
        """SPEC 5.5.1 for one text block: head + exact marker on its own line + tail."""
        if tokens(text) <= self.message_max_tokens:
            return text
        budget = UNITS_PER_TOKEN * min(TRIM_CONSTANT_TOKENS, self.message_max_tokens // 2)
        head_chars = _longest_within(text, budget)
        tail_chars = _longest_within(text[::-1], budget)
        if head_chars + tail_chars >= len(text):
            return text
        head = text[:head_chars]
        tail = text[len(text) - tail_chars :]
        omitted = tokens(text[head_chars : len(text) - tail_chars])
        return "\n".join(part for part in (head, MARKER.format(omitted), tail) if part)


@dataclass(frozen=True)
class RefTurn:
    id: str
    role: str
    text: str
    sent_at: datetime
    recorded_at: datetime
    stated_sent_at: datetime | None = None
    """The `sentAt` it gave, where it was placed elsewhere (after an erase's fence)."""

    @property
    def position(self) -> Position:
        return (self.sent_at, self.recorded_at, self.id)

    @property
    def tokens(self) -> int:
        return tokens(self.text)

    @property
    def is_question(self) -> bool:
        return self.role == "user" and bool(self.text)


@dataclass
class RefFold:
    turns_folded: int
    covers_from: datetime
    covers_until: datetime
    kept_until: int = 0
    """When its kept copy (the one a replay reads) expires: twice the retention from its commit."""


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
    watermark: Position | None


@dataclass(frozen=True)
class ExpectedWindow:
    turns: tuple[RefTurn, ...]
    """Oldest first, untrimmed (the originals)."""
    candidates: tuple[RefTurn, ...]
    """Every turn the window may take: before the current message, in range, alive."""
    since: datetime
    limits: Limits
    omitted: int | None = None
    """SPEC 5.5.7, an exchange longer than the cap: the messages of it left out."""
    question_kept: bool = True
    """With `omitted`: the exchange's question is `turns[0]` (else it is no candidate)."""

    @property
    def messages(self) -> list[tuple[str, list[str]]]:
        """The history messages as (role, their text blocks), the exchange's marker in place."""
        messages = [(t.role, [self.limits.trim(t.text)]) for t in self.turns]
        if self.omitted is not None:
            marker = opening_marker(self.omitted, self.question_kept)
            if self.question_kept:
                messages[0][1].append(marker)
            else:
                messages.insert(0, ("user", [marker]))
        return messages

    @property
    def estimated_tokens(self) -> int:
        return sum(tokens("".join(blocks)) for _, blocks in self.messages)

    @property
    def trimmed(self) -> int:
        return sum(1 for t in self.turns if self.limits.trim(t.text) != t.text)

    def held_by_neither(self, watermark: Position | None, late: set[str]) -> list[RefTurn]:
        """SPEC 5.7: the fold holds what compaction folded, so not a late turn below the mark."""
        kept = {t.id for t in self.turns}
        return [
            t
            for t in self.candidates
            if t.id not in kept and (t.id in late or watermark is None or t.position > watermark)
        ]


def opening_marker(omitted: int, question_kept: bool) -> str:
    """SPEC 5.5.7's visible marker: after the question, or opening the history without one."""
    if question_kept:
        return EXCHANGE_MARKER.format(omitted)
    return "\n".join([NO_QUESTION_MARKER, *([EXCHANGE_MARKER.format(omitted)] if omitted else [])])


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
    memory: RefFold | None = None
    """The memory the first answer served: a replay serves it again."""


@dataclass
class ReferenceConversation:
    limits: Limits
    turns: list[RefTurn] = field(default_factory=list)
    """Every recorded turn, in position order."""
    folded: set[str] = field(default_factory=set)
    """The ids a compaction has summarised."""
    skipped: set[str] = field(default_factory=set)
    """Unfolded turns a compaction passed over because their TTL had passed."""
    late: list[str] = field(default_factory=list)
    """Turns recorded below the watermark, not folded yet, in arrival order (the late list)."""
    fold: RefFold | None = None
    watermark: Position | None = None
    """Compaction has dealt with every turn up to here (folded, or passed over as expired)."""
    compactions: int = 0
    """Compaction commits, the watermark-only ones included, and erases (a compaction in
    flight across one must not commit)."""
    streak_count: int = 0
    last_contact: datetime | None = None
    contact_commits: int = 0
    """The state's version: converse commits, and erases (the fence is written over it)."""
    lease_until: int | None = None
    first_answers: dict[str, FirstAnswer] = field(default_factory=dict)
    state_expiry: int | None = None
    """The state lives the retention past its latest write (or that turn's sentAt, if later):
    a late turn must not bring the expiry of the fold and the counters forward."""
    erased_at: datetime | None = None
    """The latest erase's fence: nothing recorded at or before it is ever served."""
    state_written: bool = False
    """The conversation has a state item (a turn was recorded, or an erase fenced it)."""
    fold_versions: list[int] = field(default_factory=list)
    """The memories compaction wrote since the latest erase (their kept copies), by version."""

    # -- clocks ------------------------------------------------------------------

    def expiry(self, sent_at: datetime) -> int:
        return int((sent_at + timedelta(days=self.limits.lifetime_days)).timestamp())

    def expired(self, sent_at: datetime, wall: datetime) -> bool:
        return self.expiry(sent_at) <= wall.timestamp()

    def cutoff(self, sent_at: datetime) -> datetime:
        return sent_at - timedelta(days=self.limits.history_days)

    # -- counters ----------------------------------------------------------------

    def above_watermark(self) -> list[RefTurn]:
        mark = self.watermark
        return [t for t in self.turns if mark is None or t.position > mark]

    def at_or_below_watermark(self) -> list[RefTurn]:
        mark = self.watermark
        return [t for t in self.turns if mark is not None and t.position <= mark]

    @property
    def counted(self) -> list[RefTurn]:
        """What the unfolded counters hold: the turns compaction has still to deal with."""
        return self.above_watermark() + [t for t in self.turns if t.id in self.late]

    @property
    def counter_tokens(self) -> int:
        return sum(t.tokens for t in self.counted)

    @property
    def counter_turns(self) -> int:
        return len(self.counted)

    def placed(self, turn: RefTurn) -> RefTurn:
        """The turn as recorded: one sent at or before the latest erase (a late one, or one
        in flight while the erase answered) begins the new conversation at the fence's next
        instant, and keeps the `sentAt` it gave as its stated one."""
        fence = self.erased_at
        if fence is None or turn.sent_at > fence:
            return turn
        first = fence + INSTANT
        return replace(
            turn,
            sent_at=first,
            recorded_at=max(turn.recorded_at, first),
            stated_sent_at=turn.stated_sent_at or turn.sent_at,
        )

    def _record(self, turn: RefTurn, wall: datetime) -> None:
        assert turn == self.placed(turn), "a turn is placed before it is recorded"
        if self.watermark is not None and turn.position < self.watermark:
            self.late.append(turn.id)
        self.state_expiry = self.expiry(max(turn.sent_at, wall))
        self.state_written = True
        self.turns.append(turn)
        self.turns.sort(key=lambda t: t.position)

    def seen(self, wall: datetime) -> Seen:
        if self.state_expiry is not None and self.state_expiry <= wall.timestamp():
            # The watermark is kept: the commit's condition still compares it.
            return Seen(True, 0, None, 0, 0, 0, None, None, self.watermark)
        return Seen(
            False,
            self.streak_count,
            self.last_contact,
            self.counter_tokens,
            self.counter_turns,
            len(self.turns),
            self.lease_until,
            self.fold,
            self.watermark,
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
        newest_cap = range(max(0, n - lim.window_messages), n)
        if n and not any(candidates[i].is_question for i in newest_cap):
            return self.long_exchange(candidates, since)
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

    def long_exchange(self, candidates: list[RefTurn], since: datetime) -> ExpectedWindow:
        """SPEC 5.5.7: no question within the cap. The question, a true count, the newest part.

        The newest `r` candidates are kept, `r` at most the cap less the question's
        place, starting on an answer: the floor's `r` moved outward (else inward)
        onto an answer, then grown while the whole stays within the budget.
        """
        lim = self.limits
        n = len(candidates)
        questions = [i for i in range(n) if candidates[i].is_question]
        question = candidates[questions[-1]] if questions else None
        exchange = n - questions[-1] - 1 if questions else n
        room = min(lim.window_messages - 1, exchange)

        def starts_on_answer(r: int) -> bool:
            return candidates[n - r].role == "assistant"

        def cost(r: int) -> int:
            run = sum(tokens(lim.trim(t.text)) for t in candidates[n - r :])
            question_text = lim.trim(question.text) if question else ""
            return run + tokens(question_text + opening_marker(exchange - r, bool(question)))

        floor = min(lim.floor_messages, room)
        outward = [r for r in range(max(floor, 1), room + 1) if starts_on_answer(r)]
        inward = [r for r in range(1, floor) if starts_on_answer(r)]
        if outward or floor == 0:
            kept = outward[0] if outward else 0
            for r in range(kept + 1, room + 1):
                if cost(r) > lim.window_tokens:
                    break
                if starts_on_answer(r):
                    kept = r
        else:
            kept = inward[-1] if inward else 0
        run = tuple(candidates[n - kept :]) if kept else ()
        turns = (question, *run) if question else run
        return ExpectedWindow(
            turns, tuple(candidates), since, lim, exchange - kept, question is not None
        )

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
            gap = bool(window.held_by_neither(seen.watermark, set(self.late)))
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
            memory=expected.memory,
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
        memory = first.memory
        current = self.seen(wall).fold
        if memory is not None and memory is not current and memory.kept_until <= wall.timestamp():
            memory = None  # its kept copy expired: none rather than a newer one
        return first, window, memory

    def reply(self, turn: RefTurn, wall: datetime) -> None:
        self._record(turn, wall)

    def compact(self, wall: datetime) -> int:
        """SPEC 6: fold the live turns newer than the watermark, and the late ones; the count.

        At most 500 newer turns and 100 late ones are read; the expired among
        them are passed over, and the watermark moves past the newer read.
        """
        if not self.turns:
            return 0
        self.lease_until = None
        newer = self.above_watermark()[:500]
        late_ids = self.late[:100]
        if not newer and not late_ids:
            return 0
        passed = sorted(newer + [t for t in self.turns if t.id in late_ids], key=_position)
        live = [t for t in passed if not self.expired(t.sent_at, wall)]
        if newer:
            self.watermark = newer[-1].position
        self.late = self.late[len(late_ids) :]
        self.compactions += 1
        self.skipped |= {t.id for t in passed if t not in live}
        if not live:
            return 0
        self.folded |= {t.id for t in live}
        previous = self.fold
        retention = timedelta(days=self.limits.retention_days)
        if previous is not None and previous.covers_until + retention <= wall:
            # A memory lives no longer than its newest turn: a new one starts.
            previous = None
        self.fold_versions.append(self.compactions)  # the version the commit expects, plus one
        self.fold = RefFold(
            turns_folded=(previous.turns_folded if previous else 0) + len(live),
            covers_from=min(previous.covers_from, live[0].sent_at) if previous else live[0].sent_at,
            covers_until=max(previous.covers_until, live[-1].sent_at)
            if previous
            else live[-1].sent_at,
            kept_until=int((wall + 2 * retention).timestamp()),
        )
        return len(live)

    def erase(self, wall: datetime) -> datetime | None:
        """SPEC 10: the fence the erase answers with; None when nothing was ever stored.

        A conversation erased with nothing recorded since keeps its fence (the
        erase finds nothing new to fence off). Otherwise the state is replaced
        by one holding the fence alone: its version and compaction version move
        on (a converse or a compaction that read the old one commits nothing),
        and everything else starts anew.
        """
        if not self.state_written:
            return None
        if self.erased_at is not None and not self.turns:
            return self.erased_at
        self.erased_at = wall
        self.contact_commits += 1
        self.compactions += 1
        self.turns = []
        self.folded = set()
        self.skipped = set()
        self.late = []
        self.fold = None
        self.watermark = None
        self.streak_count = 0
        self.last_contact = None
        self.lease_until = None
        self.first_answers = {}
        self.state_expiry = None  # an empty state: read as expired or not, the same
        self.fold_versions = []
        return wall


def _position(turn: RefTurn) -> Position:
    return turn.position
