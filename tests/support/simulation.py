"""A long conversation through the real service and compactor, on in-memory adapters.

The compactor lags: each compaction request is folded only after `lag`
more turns have arrived. Before every converse call the simulation works
out whether the unfolded turns still fit what the window is guaranteed to
hold (the floor, or the token budget and the cap less one exchange's edge):
within that bound the 2x rule promises that no turn is held by neither.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from compactor.service import Compaction, Compactor

from adapters.conversation_store import ConversationKey, Fence
from adapters.summariser import OfflineSummariser
from converse_history.access import Caller
from converse_history.service import ConverseService, Incoming
from memory_core.repairs import Repair
from memory_core.rules import RulesDocument, parse_rules
from memory_core.settings import Settings, load_settings
from memory_core.tokens import estimate_tokens, estimate_turn_tokens
from memory_core.trim import trim_turn
from memory_core.turns import Role, TurnPosition
from memory_core.usage import TokenUsage
from memory_core.window import Window
from tests.support.in_memory_store import InMemoryConversationStore

KEY = ConversationKey("sim", "long")
CALLER = Caller(arn=None, identity_required=False)


class StaticRules:
    def __init__(self, retention_days: int, tenant: Mapping[str, Any] | None = None) -> None:
        # `tenant`: more of the tenant's rules (`promptCache`, say), over an unreachable cap.
        rules = {"maxTurnsPerConversation": 1_000_000, **(tenant or {})}
        self._rules = parse_rules({"tenants": {"sim": rules}}, retention_days)

    def current(self) -> RulesDocument:
        return self._rules


class SimulatedClock:
    """Epoch seconds that move only when the simulation sets them."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CollectingQueue:
    """The compaction queue's messages, kept to be delivered when a test says: the
    compaction requests, and the rests of erases (`continue_erasure`)."""

    def __init__(self) -> None:
        self.requests: list[ConversationKey] = []
        self.erasures: list[tuple[ConversationKey, Fence]] = []

    def request_compaction(self, key: ConversationKey, requested_at: datetime) -> str:
        self.requests.append(key)
        return str(len(self.requests))

    def continue_erasure(self, key: ConversationKey, fence: Fence) -> str:
        self.erasures.append((key, fence))
        return f"erasure-{len(self.erasures)}"


@dataclass
class Observed:
    gaps: list[int] = field(default_factory=list)
    compactions: list[Compaction] = field(default_factory=list)
    index_failures: list[Exception] = field(default_factory=list)
    repairs: list[Repair] = field(default_factory=list)
    memories_missing: list[int] = field(default_factory=list)
    usage: list[tuple[str, TokenUsage]] = field(default_factory=list)
    erased: list[tuple[int, bool]] = field(default_factory=list)
    """Each erase's item count, and whether it completed."""
    erasures_continued: list[tuple[int, bool]] = field(default_factory=list)

    def window_built(self, window: Window) -> None:
        pass

    def window_bounded(self, key: ConversationKey, window: Window) -> None:
        pass

    def coverage_gap(self, key: ConversationKey, missing: list[TurnPosition]) -> None:
        self.gaps.append(len(missing))

    def fragment_repaired(self, key: ConversationKey, repairs: list[Repair]) -> None:
        self.repairs.extend(repairs)

    def escalated(self, key: ConversationKey, turn_count: int) -> None:
        pass

    def compaction_enqueued(self) -> None:
        pass

    def compaction_request_failed(self, key: ConversationKey, error: Exception) -> None:
        raise AssertionError(error)

    def commit_retried(self, attempt: int) -> None:
        pass

    def replay_memory_missing(self, key: ConversationKey, version: int) -> None:
        self.memories_missing.append(version)

    def reply_usage(self, key: ConversationKey, usage: TokenUsage) -> None:
        self.usage.append((key.tenant_id, usage))

    def folded(self, compaction: Compaction) -> None:
        self.compactions.append(compaction)

    def lost_race(self) -> None:
        pass

    def index_failed(self, key: ConversationKey, error: Exception) -> None:
        self.index_failures.append(error)

    def contact_erased(self, key: ConversationKey, items: int, *, complete: bool) -> None:
        self.erased.append((items, complete))

    def erasure_continued(self, key: ConversationKey, items: int, *, complete: bool) -> None:
        self.erasures_continued.append((items, complete))


@dataclass
class Tally:
    calls_within: int = 0
    calls_beyond: int = 0
    gaps_within: int = 0
    gaps_beyond: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    unbounded_tokens: list[int] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Simulation:
    settings: Settings
    store: InMemoryConversationStore
    service: ConverseService
    compactor: Compactor
    queue: CollectingQueue
    observed: Observed

    @classmethod
    def build(cls, **environment: str) -> Simulation:
        return cls.with_settings(load_settings(environment))

    @classmethod
    def with_settings(
        cls,
        settings: Settings,
        *,
        tenant_rules: Mapping[str, Any] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Simulation:
        """A simulation over `settings`.

        `tenant_rules` adds to the tenant's rules (`promptCache`, say); `clock`
        (epoch seconds) is the wall clock of the service, the store and the
        compactor alike, the system's when None.
        """
        wall_clock = clock or time.time
        store = InMemoryConversationStore(settings.turn_retention_days, clock=wall_clock)
        queue = CollectingQueue()
        observed = Observed()
        service = ConverseService(
            store=store,
            queue=queue,  # type: ignore[arg-type]
            rules=StaticRules(settings.turn_retention_days, tenant_rules),
            settings=settings,
            telemetry=observed,
            clock=wall_clock,
        )
        compactor = Compactor(
            store=store,
            summariser=OfflineSummariser(),
            settings=settings,
            telemetry=observed,
            wall_clock=wall_clock,
        )
        return cls(settings, store, service, compactor, queue, observed)

    def within_bound(self) -> bool:
        state = self.store.state(KEY)
        if state is None:
            return True
        unfolded = self.store.unfolded_turns(KEY, state.watermark, 1_000_000)
        limits = self.settings.window_limits
        if len(unfolded) < limits.floor_messages:
            return True
        shape = limits.trim
        tokens = sum(estimate_turn_tokens(trim_turn(s.turn, shape)) for s in unfolded)
        edge = shape.head_tokens + shape.tail_tokens + 10  # the exchange's question, trimmed
        return tokens + edge <= limits.max_tokens and len(unfolded) + 2 <= limits.max_messages


def body(rng: random.Random) -> str:
    """Mixed sizes: mostly short, some paragraphs, a few pasted documents."""
    kind = rng.choices(["short", "paragraph", "document"], weights=[5, 3, 1])[0]
    size = {"short": (10, 80), "paragraph": (400, 2000), "document": (4000, 20_000)}[kind]
    return "w" * rng.randint(*size)


def simulate(pairs: int, lag: int, seed: int = 7, **environment: str) -> tuple[Simulation, Tally]:
    sim = Simulation.build(**environment)
    rng = random.Random(seed)
    tally = Tally()
    due: list[int] = []
    turns = 0
    start = datetime.now(UTC) - timedelta(minutes=2 * pairs + 10)
    history_tokens = 0
    for n in range(pairs):
        at = start + timedelta(minutes=2 * n)
        bounded = sim.within_bound()
        gaps_before = len(sim.observed.gaps)
        question = Incoming(id=f"q{n}", role="user", content=[{"text": body(rng)}], sent_at=at)
        answer = sim.service.converse(KEY.tenant_id, KEY.contact_id, question, CALLER)
        gap = len(sim.observed.gaps) > gaps_before
        if bounded:
            tally.calls_within += 1
            tally.gaps_within += gap
        else:
            tally.calls_beyond += 1
            tally.gaps_beyond += gap
        current_tokens = estimate_tokens(question.content[0]["text"])
        memory = answer["memory"]["summary"] if answer["memory"] else ""
        tally.prompt_tokens.append(
            answer["window"]["estimatedTokens"] + estimate_tokens(memory) + current_tokens
        )
        tally.unbounded_tokens.append(history_tokens + current_tokens)
        tally.answers.append(answer)
        reply = Incoming(
            id=f"a{n}",
            role="assistant",
            content=[{"text": body(rng)}],
            sent_at=at + timedelta(minutes=1),
        )
        sim.service.record(KEY.tenant_id, KEY.contact_id, reply, CALLER)
        history_tokens += current_tokens + estimate_tokens(reply.content[0]["text"])
        turns += 2
        due = compact_when_due(sim, due, turns, lag)
    return sim, tally


def compact_when_due(sim: Simulation, due: list[int], turns: int, lag: int) -> list[int]:
    """The compactor lagging: each request queued is served `lag` turns after `turns`.

    `due` holds the turn counts at which earlier requests fall due; those due by
    `turns` are served now, and the rest come back.
    """
    due = [*due, *(turns + lag for _ in sim.queue.requests)]
    sim.queue.requests.clear()
    for _ in [d for d in due if d <= turns]:
        sim.compactor.compact(KEY)
    return [d for d in due if d > turns]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One scripted exchange: the contact's message and the agent's reply, each at its time."""

    question: str
    asked_at: float
    """Epoch seconds."""
    reply: str
    replied_at: float


def _sent_now(clock: SimulatedClock, message_id: str, role: Role, text: str) -> Incoming:
    """A text message whose `sentAt` is the simulated clock's now."""
    sent_at = datetime.fromtimestamp(clock.now, UTC)
    return Incoming(id=message_id, role=role, content=[{"text": text}], sent_at=sent_at)


def play(
    sim: Simulation, clock: SimulatedClock, exchanges: Iterable[Exchange], lag: int
) -> list[dict[str, Any]]:
    """The converse answers of `exchanges`, each played at its own time, in order.

    `clock` (the simulation's wall clock) is set to each message's time, which is
    its `sentAt` too; the compactor serves each request `lag` turns after it was
    made, as in `simulate`.
    """
    answers: list[dict[str, Any]] = []
    due: list[int] = []
    turns = 0
    for n, exchange in enumerate(exchanges):
        clock.now = exchange.asked_at
        question = _sent_now(clock, f"q{n}", "user", exchange.question)
        answers.append(sim.service.converse(KEY.tenant_id, KEY.contact_id, question, CALLER))
        clock.now = exchange.replied_at
        reply = _sent_now(clock, f"a{n}", "assistant", exchange.reply)
        sim.service.record(KEY.tenant_id, KEY.contact_id, reply, CALLER)
        turns += 2
        due = compact_when_due(sim, due, turns, lag)
    return answers
