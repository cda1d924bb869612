"""A simulated day: 10,000 conversations, the write units each partition takes per second.

`scale_day` in bench/results.json. DynamoDB takes at most 1,000 write units a
second on one partition; a conversation's items share one partition key
(`TENANT#t#CONTACT#c`), and the contacts index puts a tenant's contacts on 16
shard partitions (`TENANT#t#SHARD#nn`). The figure is the hottest of those in
any second of a realistic day, as a share of that limit (goal: at most 10%),
with the day's cost (bench/prices.py) and the peak Lambda concurrency.

How. Running 10,000 conversations through moto would take hours, so the store
is modelled and the domain is not:

- Every message is a real `Turn`, prepared and estimated by `memory_core`
  (`prepared`, `estimate_turn_tokens`), and written as the adapter writes it:
  its turn item and message-id marker are built by `adapters.dynamodb_items`'
  codecs (`turn_item`, `marker_item`, `marker_answer`, `usage_attribute`) and
  sized with bench/write_units.py's `item_size`. Messages are drawn from a
  pool of such turns (`POOL_SIZE` a kind), so the codecs run a few thousand
  times, not a few hundred thousand.
- The state item is rebuilt before and after every write from what the
  conversation holds (counters, streak, rate record, lease, listing), with
  the adapter's attribute names and codecs (`contacts_entry`, `turn_sort_key`),
  and billed as DynamoDB bills an update: on the larger of the two. The memory
  (the fold's summary, `fold_item`'s attributes) is on its own item
  (`TURN#~MEMORY`) where `adapters.dynamodb_items` has one (`MEMORY_SK`), and on
  the state where it has not: `simulate(memory_item=...)` models either.
- The decisions are the domain's own: the rate limit (`seconds_until_free`,
  `remember`), the turn cap (`next_streak`, `exceeds_cap`), a tool result's
  exemption from both (`answers_only_tools`) and the compaction trigger
  (`compaction_due` on a `ConversationState`, with the lease).
- Each call's writes are billed by DynamoDB's rules (`write_units_for`: 1 WRU
  per started KB, twice that in a transaction; `index_entry_units` for the
  contacts index's KEYS_ONLY entry) into a counter keyed by (partition key,
  second). What a call writes follows the adapters: a converse call and a
  reply each commit a transaction of marker, turn and state
  (dynamodb_converse_commit.py); the first converse call also lists the
  contact (one index entry on its shard partition); a compaction claims with
  an UpdateItem and commits a transaction of the state and the kept fold
  (`FOLD#<version>`), and the served memory when it has its own item
  (dynamodb_fold_commit.py).
- The compactor is the event source mapping of infra/compaction.py: batches of
  up to 10 records gathered for up to 5 seconds, at most 5 invocations at once,
  the records of a batch one after the other. Its timing decides when the
  lease clears and so when the next compaction can start.

The figures: `exchanges` counts the contact messages recorded (answered or
escalated; a refused one is retried and counted once); `hottest_partition` is
the (partition key, second) with the most write units, a conversation's or a
contacts index shard's, with the writes that made it; `day_cost_usd` prices
DynamoDB's write and read units, Lambda's requests and GB-seconds (`Durations`),
API Gateway's REST requests (every converse and reply call) and SQS's requests
(a send per compaction request, a receive and a delete per batch, and the
pollers' empty receives), all from bench/prices.py; the summariser's model,
logs and metrics are left out. `peak_lambda_concurrency` is the most
invocations running at one instant (converse and compactor functions together),
found by a sweep over every invocation's start and end.

Everything is drawn from `derived_rng("scale_day", seed, ...)`: the same seed
gives the same day. The assumptions are `DayShape` (arrivals) and `Durations`
(Lambda), each field documented, and docs/decisions.md has them in prose.
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any

from adapters import dynamodb_items
from adapters.conversation_store import encode_content, format_instant
from adapters.dynamodb_items import (
    LAST_WINDOW_AT,
    STATE_SK,
    TTL_ATTRIBUTE,
    Item,
    contacts_entry,
    contacts_shard,
    fold_item,
    item_key,
    marker_answer,
    marker_item,
    shard_of,
    turn_item,
    turn_sort_key,
    usage_attribute,
)
from bench import prices
from bench.common import SEED, derived_rng, percentile
from bench.conversations import corpus
from bench.write_units import (
    index_entry,
    index_entry_units,
    item_size,
    number_size,
    write_units_for,
)
from memory_core.compaction_trigger import compaction_due
from memory_core.conversation import ConversationState, Fold
from memory_core.history_range import expires_at
from memory_core.pending_calls import answers_only_tools
from memory_core.rate_limit import remember, seconds_until_free
from memory_core.rules.model import RateLimit
from memory_core.settings import Settings, load_settings
from memory_core.tokens import estimate_turn_tokens, text_units
from memory_core.trim import prepared
from memory_core.turn_cap import NO_STREAK, Streak, exceeds_cap, next_streak
from memory_core.turns import Role, Turn, TurnPosition
from memory_core.usage import TokenUsage

DAY_SECONDS = 86_400
DAY_START = datetime(2026, 6, 1, tzinfo=UTC)
"""A Monday; the day's instants are seconds after it."""
PARTITION_LIMIT_WRU = 1_000
"""DynamoDB's write throughput on one partition, per second (on-demand or provisioned)."""
QUERY_UNIT_BYTES = 4 * 1024
"""A read request unit: one strongly consistent read of up to 4 KB (every read is consistent)."""
POOL_SIZE = 512
"""Real turns built and sized per kind of message; each message of the day is one of them."""
HISTORY_PAGE = 27
"""A converse call's Query: the state and 26 turns (`history_window_max_messages` + 2)."""
LIFETIME_DAYS = 30
COMPACTION_BATCH_SIZE = 10
COMPACTION_BATCH_WINDOW = 5.0
COMPACTION_MAX_CONCURRENCY = 5
"""infra/compaction.py's event source mapping."""
SQS_IDLE_POLLERS = 5
SQS_LONG_POLL_SECONDS = 20
"""Lambda polls a queue with 5 long-polling pollers while it is quiet: each empty
receive is a billed request, one per poller every 20 seconds."""
ID_WIDTH = 36
"""Message ids as most clients make them: UUIDs."""
TOOL_USE_ID = "tooluse_" + "x" * 22


class Kind(Enum):
    CONTACT = "contact"
    """The contact's message, a converse call."""
    TOOL_RESULT = "tool_result"
    """The agent's tool results, a converse call (answers only tools)."""
    AGENT = "agent"
    """The agent's text reply, a reply call (with the model's usage)."""
    TOOL_USE = "tool_use"
    """The agent's tool call, a reply call (with the model's usage)."""


@dataclass(frozen=True)
class DayShape:
    """How the day's conversations arrive and run. Every default is an assumption."""

    tenants: int = 50
    zipf_exponent: float = 1.1
    """Tenant k (from 1) gets a share of conversations proportional to 1 / k**s."""
    time_zones: tuple[int, ...] = (-8, -5, -5, 0, 0, 0, 1, 1, 2, 8)
    """Tenants' UTC offsets in hours, drawn uniformly: most in Europe, some in America and Asia."""
    rate_limited_share: float = 0.3
    """Tenants with a rate limit of 20 messages a minute (rules.example.json's); the rest none."""
    max_turns: int = 25
    idle_reset_hours: int = 24
    bursts: int = 4
    burst_share: float = 0.12
    """The day's conversations that start in bursts (a mailing, an outage, a campaign)."""
    burst_minutes: tuple[float, float] = (3.0, 10.0)
    chatty_humans: int = 3
    """Contacts who send a message every 2 to 5 seconds for an hour (past the cap: escalated)."""
    chatty_seconds: float = 3_600.0
    chatty_gap: tuple[float, float] = (2.0, 5.0)
    tool_loops: int = 2
    """Agents in long tool loops: 3 rounds of 100 to 300 tool calls, one every 0.6 to 3 seconds."""
    tool_loop_rounds: int = 3
    tool_loop_steps: tuple[int, int] = (100, 300)
    tool_loop_model_seconds: tuple[float, float] = (0.5, 2.0)
    """A tool loop's model answers fast (short prompts, a tool call for an answer): uniform."""
    exchanges_median: float = 4.0
    exchanges_sigma: float = 0.8
    exchanges_max: int = 60
    """An ordinary conversation's contact messages: lognormal, median 4 (mean about 5.5)."""
    tool_step_share: float = 0.25
    """Ordinary exchanges where the agent calls 1 to 3 tools before it answers."""
    think_median: float = 25.0
    think_sigma: float = 0.9
    """Seconds from the agent's reply to the contact's next message: lognormal, 3 s to 30 min."""
    model_seconds: tuple[float, float] = (0.8, 6.0)
    """From a converse call to the agent's reply (the model's latency): uniform."""
    tool_seconds: tuple[float, float] = (0.1, 1.0)
    """From a tool call to its results: uniform."""
    summary_growth: float = 0.25
    """A fold's summary grows by this share of the tokens it folds, up to the summary cap."""


@dataclass(frozen=True)
class Durations:
    """Lambda durations (assumed, in ms): the day's concurrency and GB-seconds come from them.

    A warm converse call in AWS is a Query and a transaction (about 10 ms each)
    plus the handler's own work (bench `local_e2e` measures 100 ms locally, moto
    and an HTTP hop included); a reply is one transaction. A compaction is a
    Bedrock summary of about 2,000 tokens into at most 800: seconds.
    """

    converse_ms: float = 80.0
    reply_ms: float = 50.0
    compaction_ms: float = 5_000.0
    """One record: reads, the summariser's call (most of it), the commit."""
    compactor_overhead_ms: float = 50.0
    """Per invocation: the batch's bookkeeping and metrics."""
    memory_mb: int = 512
    """infra/service_function.py's default, both functions (Arm)."""


# -- the messages: real turns, built and sized once ----------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    tokens: int
    turn_bytes: int
    marker_bytes: int


def reference_partition() -> str:
    """Every partition key of the day has this length (fixed-width tenant and contact ids)."""
    return partition(0, 0)


def tenant_id(tenant: int) -> str:
    return f"tenant-{tenant:02d}"


def contact_id(conversation: int) -> str:
    return f"contact-{conversation:06d}"


def partition(tenant: int, conversation: int) -> str:
    return f"TENANT#{tenant_id(tenant)}#CONTACT#{contact_id(conversation)}"


def message_length(rng: random.Random, kind: Kind) -> int:
    """A message's characters, by kind."""
    if kind is Kind.CONTACT:
        roll = rng.random()
        if roll < 0.02:
            return rng.randint(4_000, 20_000)  # a pasted document
        if roll < 0.08:
            return rng.randint(400, 4_000)  # a paragraph
        return max(2, min(2_000, round(rng.lognormvariate(math.log(110), 0.9))))
    if kind is Kind.AGENT:
        return max(40, min(8_000, round(rng.lognormvariate(math.log(700), 0.7))))
    if kind is Kind.TOOL_USE:
        return max(20, min(2_000, round(rng.lognormvariate(math.log(150), 0.6))))
    return max(50, min(30_000, round(rng.lognormvariate(math.log(1_500), 1.0))))


def _content(kind: Kind, text: str) -> list[dict[str, Any]]:
    if kind is Kind.TOOL_USE:
        return [{"toolUse": {"toolUseId": TOOL_USE_ID, "name": "lookup", "input": {"q": text}}}]
    if kind is Kind.TOOL_RESULT:
        result = {"toolUseId": TOOL_USE_ID, "content": [{"text": text}], "status": "success"}
        return [{"toolResult": result}]
    return [{"text": text}]


def sample(kind: Kind, text: str, settings: Settings, number: int) -> Sample:
    """A message as the adapter writes it: its turn item and its marker, sized."""
    role: Role = "user" if kind in (Kind.CONTACT, Kind.TOOL_RESULT) else "assistant"
    sent = DAY_START + timedelta(hours=12)
    turn_id = f"{number:0{ID_WIDTH}d}"
    turn = prepared(
        Turn(turn_id, role, _content(kind, text), sent, sent), settings.window_limits.trim
    )
    tokens = estimate_turn_tokens(turn)
    ttl = expires_at(sent, LIFETIME_DAYS)
    pk = reference_partition()
    item = turn_item(pk, turn, encoded=encode_content(turn), tokens=tokens, ttl=ttl)
    marker = marker_item(pk, turn, ttl=ttl)
    if role == "user":
        # What a converse call keeps with the id, for a retry to be answered the same.
        marker |= marker_answer(5, "model", 0, 3, None)
    else:
        usage = TokenUsage(2_400, tokens, 2_400 + tokens)
        item |= usage_attribute(usage)
    assert answers_only_tools(turn) == (kind is Kind.TOOL_RESULT)
    return Sample(tokens, item_size(item), item_size(marker))


def pools(rng: random.Random, settings: Settings) -> dict[Kind, list[Sample]]:
    source = corpus(rng, chars=60_000)
    built: dict[Kind, list[Sample]] = {}
    for kind in Kind:
        samples = []
        for n in range(POOL_SIZE):
            size = message_length(rng, kind)
            start = rng.randrange(0, len(source) - size)
            text = source[start : start + size]
            samples.append(sample(kind, text, settings, n))
        built[kind] = samples
    return built


def chars_per_token(rng: random.Random) -> float:
    text = corpus(rng, chars=8_000)
    return len(text) / (text_units(text) / 64)


# -- the state item --------------------------------------------------------------------


@dataclass
class Conversation:
    """One contact's conversation: its plan, the domain's state, what the store holds."""

    number: int
    tenant: int
    style: str
    """`ordinary`, `burst`, `chatty` or `tool_loop`."""
    start: float
    exchanges: int
    rate_limit: RateLimit | None
    # The domain's state, as the state item holds it.
    version: int = 0
    streak: Streak = NO_STREAK
    recent: tuple[datetime, ...] = ()
    unfolded_tokens: int = 0
    unfolded_turns: int = 0
    turns_recorded: int = 0
    lease_until: datetime | None = None
    window_at: bool = False
    listed: bool = False
    compaction_version: int = 0
    summary_tokens: int = 0
    turns_folded: int = 0
    watermark: bool = False
    claim: int | None = None
    """Unfolded turns an in-flight compaction claimed (None: no claim)."""
    # The store.
    newest: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_PAGE - 1))
    unfolded: list[tuple[int, int]] = field(default_factory=list)
    """(bytes, tokens) of each turn above the watermark, oldest first."""
    # The script.
    steps_left: int = 0
    messages_sent: int = 0

    @property
    def partition(self) -> str:
        return partition(self.tenant, self.number)


MEMORY_SK: str | None = getattr(dynamodb_items, "MEMORY_SK", None)
"""The served memory's own item (`TURN#~MEMORY`), where the adapter has one; without it,
the summary is on the state item, which every converse call and reply rewrites."""


@dataclass
class StateSizer:
    """The state item's bytes, built from the conversation as the adapter would store it."""

    chars_per_token: float
    summary_cap: int
    memory_item: bool = MEMORY_SK is not None
    """The memory has its own item (the summary is not on the state)."""
    _fold_bytes: dict[int, int] = field(default_factory=dict)
    _shapes: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def fold_attributes(self, tokens: int) -> int:
        """Bytes of the fold's attributes in the state item (as in the kept `FOLD#` item)."""
        if tokens not in self._fold_bytes:
            kept = self.fold_item(tokens)
            self._fold_bytes[tokens] = item_size(kept) - item_size(
                {name: kept[name] for name in ("PK", "SK", TTL_ATTRIBUTE)}
            )
        return self._fold_bytes[tokens]

    def fold_item_bytes(self, tokens: int) -> int:
        """The kept fold's bytes (`FOLD#<version>`): its attributes and its keys and TTL."""
        kept = self.fold_item(tokens)
        keys = item_size({name: kept[name] for name in ("PK", "SK", TTL_ATTRIBUTE)})
        return self.fold_attributes(tokens) + keys

    def memory_bytes(self, c: Conversation) -> int:
        """The served memory item's bytes (0: none, or the summary is on the state)."""
        if not (self.memory_item and c.summary_tokens):
            return 0
        kept = self.fold_item(c.summary_tokens)
        served = {**kept, **item_key(reference_partition(), MEMORY_SK or "")}
        return self.fold_item_bytes(c.summary_tokens) - item_size(kept) + item_size(served)

    def fold_item(self, tokens: int) -> Item:
        summary = "x" * round(tokens * self.chars_per_token)
        at = DAY_START + timedelta(hours=12)
        fold = Fold(summary, at, at, 999, 99)
        return fold_item(reference_partition(), fold, ttl=expires_at(at, 2 * LIFETIME_DAYS))

    def state_item(self, c: Conversation, *, claimed: bool | None = None) -> Item:
        """The state item, as the converse and fold commits leave it (the fold's summary aside:
        `fold_attributes`). Instants are fixed-width strings, so any instant sizes the same."""
        at = format_instant(DAY_START)
        position = turn_sort_key(TurnPosition(DAY_START, DAY_START, "0" * ID_WIDTH))
        item: Item = {
            **item_key(c.partition, STATE_SK),
            "version": {"N": str(c.version)},
            "streakCount": {"N": str(c.streak.count)},
            "lastContactAt": {"S": at},
            "recentContact": {"L": [{"S": at} for _ in c.recent]},
            TTL_ATTRIBUTE: {"N": str(expires_at(DAY_START, LIFETIME_DAYS))},
            "unfoldedTokens": {"N": str(c.unfolded_tokens)},
            "unfoldedTurns": {"N": str(c.unfolded_turns)},
            "turnsRecorded": {"N": str(c.turns_recorded)},
        }
        if c.listed:
            item |= contacts_entry(tenant_id(c.tenant), contact_id(c.number))
        if c.lease_until is not None:
            item["leaseUntil"] = {"N": str(int(c.lease_until.timestamp()))}
        if c.window_at:
            item[LAST_WINDOW_AT] = {"S": at}
        if c.compaction_version:
            item["foldVersion"] = {"N": str(c.compaction_version)}
        if c.watermark:
            item["foldWatermark"] = {"S": position}
        if c.claim is not None if claimed is None else claimed:
            item["foldingThrough"] = {"S": position}
        return item

    def size(self, c: Conversation, *, claimed: bool | None = None) -> int:
        """`item_size` of `state_item` and the fold's attributes, from a cache of the item's
        shape: the counters are the only numbers that change, and each adds its own bytes."""
        holds_claim = c.claim is not None if claimed is None else claimed
        shape = (
            len(c.recent),
            c.listed,
            c.lease_until is not None,
            c.window_at,
            c.compaction_version > 0,
            c.watermark,
            holds_claim,
        )
        if shape not in self._shapes:
            blank = replace(
                c,
                version=0,
                streak=Streak(0, None),
                unfolded_tokens=0,
                unfolded_turns=0,
                turns_recorded=0,
                compaction_version=1 if c.compaction_version else 0,
                lease_until=LEASE_PLACEHOLDER if c.lease_until is not None else None,
            )
            self._shapes[shape] = item_size(self.state_item(blank, claimed=holds_claim))
        size = self._shapes[shape]
        for number, blank_number in (
            (c.version, 0),
            (c.streak.count, 0),
            (c.unfolded_tokens, 0),
            (c.unfolded_turns, 0),
            (c.turns_recorded, 0),
            (c.compaction_version, 1 if c.compaction_version else 0),
        ):
            size += _number_bytes(number) - _number_bytes(blank_number)
        if c.lease_until is not None:
            lease = int(c.lease_until.timestamp())
            size += _number_bytes(lease) - _number_bytes(int(LEASE_PLACEHOLDER.timestamp()))
        if c.summary_tokens and not self.memory_item:
            size += self.fold_attributes(c.summary_tokens)
        return size


@functools.cache
def _number_bytes(number: int) -> int:
    return number_size(str(number))


LEASE_PLACEHOLDER = DAY_START + timedelta(seconds=1234)


# -- the day's arrivals ------------------------------------------------------------------


def daily_curve(local_hour: float) -> float:
    """Relative arrivals by local hour: a night floor, a morning and an afternoon peak."""
    morning = math.exp(-(((local_hour - 11.0) / 2.2) ** 2))
    afternoon = 0.9 * math.exp(-(((local_hour - 15.5) / 2.5) ** 2))
    return 0.06 + morning + afternoon


CURVE_MAX = max(daily_curve(h / 10) for h in range(240))


def curve_second(rng: random.Random, utc_offset: int) -> float:
    """A second of the (UTC) day drawn from the daily curve in the tenant's local time."""
    while True:
        local = rng.uniform(0, DAY_SECONDS)
        if rng.uniform(0, CURVE_MAX) <= daily_curve(local / 3600):
            return (local - utc_offset * 3600) % DAY_SECONDS


@dataclass(frozen=True)
class Tenants:
    weights: list[float]
    offsets: list[int]
    rate_limits: list[RateLimit | None]

    def draw(self, rng: random.Random) -> int:
        return rng.choices(range(len(self.weights)), weights=self.weights)[0]


def tenants(rng: random.Random, shape: DayShape) -> Tenants:
    limit = RateLimit.model_validate({"messages": 20, "perSeconds": 60})
    return Tenants(
        weights=[1 / (k + 1) ** shape.zipf_exponent for k in range(shape.tenants)],
        offsets=[rng.choice(shape.time_zones) for _ in range(shape.tenants)],
        rate_limits=[
            limit if rng.random() < shape.rate_limited_share else None for _ in range(shape.tenants)
        ],
    )


def plan(conversations: int, seed: int, shape: DayShape) -> list[Conversation]:
    """The day's conversations: who, when they start, how long they run."""
    rng = derived_rng("scale_day", seed, "arrivals")
    who = tenants(rng, shape)
    chatty = min(conversations, shape.chatty_humans + shape.tool_loops)
    bursts = [
        (who.draw(rng), rng.uniform(*shape.burst_minutes) * 60)
        for _ in range(shape.bursts if conversations >= 100 else 0)
    ]
    bursts_at = [curve_second(rng, who.offsets[tenant]) for tenant, _ in bursts]
    in_bursts = round(shape.burst_share * conversations) if bursts else 0
    planned = []
    for number in range(conversations):
        style = "ordinary"
        if number < chatty:
            style = "chatty" if number < min(chatty, shape.chatty_humans) else "tool_loop"
        elif number < chatty + in_bursts:
            style = "burst"
        if style == "burst":
            b = number % len(bursts)
            tenant, length = bursts[b]
            start = (bursts_at[b] + rng.uniform(0, length)) % DAY_SECONDS
        else:
            tenant = who.draw(rng)
            start = curve_second(rng, who.offsets[tenant])
            if style != "ordinary":
                # An hour of chatter ends within the day.
                start = min(start, DAY_SECONDS - shape.chatty_seconds - 60)
        exchanges = max(
            1,
            min(
                shape.exchanges_max,
                round(rng.lognormvariate(math.log(shape.exchanges_median), shape.exchanges_sigma)),
            ),
        )
        if style == "tool_loop":
            exchanges = shape.tool_loop_rounds
        planned.append(
            Conversation(number, tenant, style, start, exchanges, who.rate_limits[tenant])
        )
    return planned


# -- the simulation -----------------------------------------------------------------------


class Event(Enum):
    CONVERSE = 0
    REPLY = 1
    BATCH_DUE = 2
    COMPACTION_START = 3
    COMPACTION_COMMIT = 4


@dataclass
class Day:
    """What the day did: the write units by partition and second, and everything counted."""

    table_wru: Counter[tuple[int, int]] = field(default_factory=Counter)
    """(conversation, second) -> WRU on the conversation's partition."""
    index_wru: Counter[tuple[int, int, int]] = field(default_factory=Counter)
    """(tenant, shard, second) -> WRU on the contacts index's shard partition."""
    billed_wru: int = 0
    """Every bill's total, counted apart from the partitions: the two must agree."""
    rru: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    invocations: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, function) of every Lambda invocation, in seconds."""
    compaction_delays: list[float] = field(default_factory=list)
    """Seconds from a compaction request to its record's start."""
    sqs_requests: int = 0
    bytes_written: int = 0
    memory_item: bool = False
    """The layout modelled: the memory in its own item (True) or on the state."""

    detail: dict[tuple[int, int], list[tuple[str, int]]] = field(default_factory=dict)
    """(conversation, second) -> what was written there: (call, WRU) each."""

    def write(self, c: Conversation, at: float, units: int, call: str) -> None:
        key = (c.number, int(at))
        self.table_wru[key] += units
        self.billed_wru += units
        self.detail.setdefault(key, []).append((call, units))

    def list_contact(self, c: Conversation, at: float, state: Item) -> None:
        entry = index_entry(state)
        assert entry is not None
        units = index_entry_units(entry)
        self.index_wru[(c.tenant, shard_of(contact_id(c.number)), int(at))] += units
        self.billed_wru += units


@dataclass
class Simulation:
    conversations: list[Conversation]
    shape: DayShape
    durations: Durations
    settings: Settings
    samples: dict[Kind, list[Sample]]
    sizer: StateSizer
    rng: random.Random
    day: Day = field(default_factory=Day)
    _events: list[tuple[float, int, Event, int, Any]] = field(default_factory=list)
    _seq: int = 0
    _batch: list[tuple[int, float]] = field(default_factory=list)
    _batch_number: int = 0
    _workers: list[float] = field(default_factory=list)

    def run(self) -> Day:
        self._workers = [0.0] * COMPACTION_MAX_CONCURRENCY
        self.day.memory_item = self.sizer.memory_item
        for c in self.conversations:
            self._at(c.start, Event.CONVERSE, c.number, Kind.CONTACT)
        handlers: dict[Event, Callable[[float, Conversation, Any], None]] = {
            Event.CONVERSE: self._converse,
            Event.REPLY: self._reply,
            Event.COMPACTION_START: self._compaction_start,
            Event.COMPACTION_COMMIT: self._compaction_commit,
        }
        while self._events:
            at, _, event, number, payload = heapq.heappop(self._events)
            if event is Event.BATCH_DUE:
                if payload == self._batch_number and self._batch:
                    self._dispatch(at)
                continue
            handlers[event](at, self.conversations[number], payload)
        return self.day

    def _at(self, at: float, event: Event, number: int, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, self._seq, event, number, payload))

    def _draw(self, kind: Kind) -> Sample:
        return self.rng.choice(self.samples[kind])

    def _invoke(self, at: float, ms: float, function: str) -> None:
        self.day.invocations.append((at, at + ms / 1000, function))

    def _now(self, at: float) -> datetime:
        return DAY_START + timedelta(seconds=at)

    # -- the converse Lambda ---------------------------------------------------------

    def _converse(self, at: float, c: Conversation, kind: Kind) -> None:
        day, now = self.day, self._now(at)
        day.calls["converse"] += 1
        self._invoke(at, self.durations.converse_ms, "converse")
        # The Query: the state, the memory and the newest turns, strongly consistent.
        state_before = self.sizer.size(c) if self._stored(c) else 0
        read = state_before + self.sizer.memory_bytes(c) + sum(c.newest)
        day.rru += max(1, math.ceil(read / QUERY_UNIT_BYTES))
        if kind is Kind.CONTACT:
            c.messages_sent += 1
            wait = seconds_until_free(c.recent, now, c.rate_limit)
            if wait:
                # Refused, not recorded: one more read (is it a retry?), then a 429.
                day.calls["refused"] += 1
                day.rru += 1
                if c.style != "chatty":
                    c.messages_sent -= 1
                    self._at(at + wait + self.rng.uniform(0, 2), Event.CONVERSE, c.number, kind)
                else:
                    self._next_chatty(at, c)
                return
            c.streak = next_streak(c.streak, now, self.shape.idle_reset_hours)
            c.recent = remember(c.recent, now, c.rate_limit)
        sample = self._draw(kind)
        escalate = exceeds_cap(c.streak, self.shape.max_turns)
        lease = self._lease_if_due(c, sample.tokens, now)
        first = not c.listed
        c.version += 1
        c.lease_until = lease or c.lease_until
        c.window_at = c.window_at or not escalate
        c.listed = True
        self._record(at, c, sample, state_before, f"converse:{kind.value}")
        if first:
            listed = {
                **item_key(c.partition, STATE_SK),
                **contacts_entry(tenant_id(c.tenant), contact_id(c.number)),
            }
            self.day.list_contact(c, at, listed)
        if lease is not None:
            self._request_compaction(at, c)
        self._after_converse(at, c, kind, escalate)

    def _lease_if_due(self, c: Conversation, tokens: int, now: datetime) -> datetime | None:
        after = ConversationState(
            unfolded_tokens=c.unfolded_tokens + tokens,
            unfolded_turns=c.unfolded_turns + 1,
            lease_until=c.lease_until,
        )
        if not compaction_due(after, self.settings, now):
            return None
        return now + timedelta(seconds=self.settings.compaction_lease_seconds)

    @staticmethod
    def _stored(c: Conversation) -> bool:
        return bool(c.turns_recorded or c.compaction_version)

    def _record(self, at: float, c: Conversation, sample: Sample, before: int, call: str) -> None:
        """A transaction: the marker, the turn, and the state (the larger of its two images)."""
        c.unfolded_tokens += sample.tokens
        c.unfolded_turns += 1
        c.turns_recorded += 1
        after = self.sizer.size(c)
        units = (
            write_units_for(sample.marker_bytes, transactional=True)
            + write_units_for(sample.turn_bytes, transactional=True)
            + write_units_for(max(before, after), transactional=True)
        )
        self.day.write(c, at, units, call)
        self.day.bytes_written += sample.marker_bytes + sample.turn_bytes
        c.newest.append(sample.turn_bytes)
        c.unfolded.append((sample.turn_bytes, sample.tokens))

    def _after_converse(self, at: float, c: Conversation, kind: Kind, escalate: bool) -> None:
        shape = self.shape
        if escalate:
            # A person takes over: the agent answers no more; the contact goes on.
            self.day.calls["escalated"] += 1
            if c.style == "chatty":
                if kind is Kind.CONTACT:  # a tool result's escalation leaves the chatter alone
                    self._next_chatty(at, c)
            elif c.messages_sent < c.exchanges:
                self._at(at + self._think(), Event.CONVERSE, c.number, Kind.CONTACT)
            return
        if kind is Kind.CONTACT:
            if c.style == "tool_loop":
                c.steps_left = self.rng.randint(*shape.tool_loop_steps)
            elif self.rng.random() < shape.tool_step_share:
                c.steps_left = self.rng.randint(1, 3)
            else:
                c.steps_left = 0
            if c.style == "chatty":
                self._next_chatty(at, c)
        else:
            c.steps_left -= 1
        reply = Kind.TOOL_USE if c.steps_left > 0 else Kind.AGENT
        latency = shape.tool_loop_model_seconds if c.style == "tool_loop" else shape.model_seconds
        self._at(at + self.rng.uniform(*latency), Event.REPLY, c.number, reply)

    def _next_chatty(self, at: float, c: Conversation) -> None:
        following = at + self.rng.uniform(*self.shape.chatty_gap)
        if following < c.start + self.shape.chatty_seconds:
            self._at(following, Event.CONVERSE, c.number, Kind.CONTACT)

    def _think(self) -> float:
        shape = self.shape
        seconds = self.rng.lognormvariate(math.log(shape.think_median), shape.think_sigma)
        return max(3.0, min(1_800.0, seconds))

    def _reply(self, at: float, c: Conversation, kind: Kind) -> None:
        self.day.calls["reply"] += 1
        self._invoke(at, self.durations.reply_ms, "converse")
        before = self.sizer.size(c) if self._stored(c) else 0
        self._record(at, c, self._draw(kind), before, f"reply:{kind.value}")
        if kind is Kind.TOOL_USE:
            self._at(
                at + self.rng.uniform(*self.shape.tool_seconds),
                Event.CONVERSE,
                c.number,
                Kind.TOOL_RESULT,
            )
        elif c.style != "chatty" and c.messages_sent < c.exchanges:
            self._at(at + self._think(), Event.CONVERSE, c.number, Kind.CONTACT)

    # -- the compactor ---------------------------------------------------------------

    def _request_compaction(self, at: float, c: Conversation) -> None:
        self.day.sqs_requests += 1  # SendMessage
        self.day.calls["compaction_requests"] += 1
        if not self._batch:
            self._batch_number += 1
            self._at(at + COMPACTION_BATCH_WINDOW, Event.BATCH_DUE, -1, self._batch_number)
        self._batch.append((c.number, at))
        if len(self._batch) == COMPACTION_BATCH_SIZE:
            self._dispatch(at)

    def _dispatch(self, at: float) -> None:
        """The batch to the first free of the compactor's invocations; its records in turn."""
        batch, self._batch = self._batch, []
        self._batch_number += 1
        free = heapq.heappop(self._workers)
        start = max(at, free)
        cursor = start + self.durations.compactor_overhead_ms / 1000
        for number, requested in batch:
            self.day.compaction_delays.append(cursor - requested)
            self._at(cursor, Event.COMPACTION_START, number)
            cursor += self.durations.compaction_ms / 1000
        heapq.heappush(self._workers, cursor)
        self.day.invocations.append((start, cursor, "compactor"))
        self.day.sqs_requests += 2  # the poller's ReceiveMessage, and DeleteMessageBatch

    def _compaction_start(self, at: float, c: Conversation, _: Any) -> None:
        day = self.day
        day.calls["compactions"] += 1
        state = self.sizer.size(c)
        # The state (and its memory), then the Query of the turns above the watermark.
        day.rru += max(1, math.ceil((state + self.sizer.memory_bytes(c)) / QUERY_UNIT_BYTES))
        day.rru += max(1, math.ceil(sum(b for b, _ in c.unfolded) / QUERY_UNIT_BYTES))
        if c.claim is not None or not c.unfolded:
            # Nothing to fold (or another compaction holds the claim): the lease goes.
            day.write(c, at, write_units_for(state, transactional=False), "compaction:clear_lease")
            c.lease_until = None
            return
        # The claim: an UpdateItem that sets `foldingThrough`.
        claimed = self.sizer.size(c, claimed=True)
        day.write(
            c, at, write_units_for(max(state, claimed), transactional=False), "compaction:claim"
        )
        c.claim = len(c.unfolded)
        self._at(at + self.durations.compaction_ms / 1000 - 0.05, Event.COMPACTION_COMMIT, c.number)

    def _compaction_commit(self, at: float, c: Conversation, _: Any) -> None:
        assert c.claim is not None
        before = self.sizer.size(c)
        memory_before = self.sizer.memory_bytes(c)
        passed, c.unfolded = c.unfolded[: c.claim], c.unfolded[c.claim :]
        tokens = sum(t for _, t in passed)
        c.claim = None
        c.unfolded_tokens -= tokens
        c.unfolded_turns -= len(passed)
        c.lease_until = None
        c.compaction_version += 1
        c.watermark = True
        c.summary_tokens = min(
            self.settings.memory_summary_max_tokens,
            round(c.summary_tokens + self.shape.summary_growth * tokens),
        )
        c.turns_folded += len(passed)
        after = self.sizer.size(c)
        kept = self.sizer.fold_item_bytes(c.summary_tokens)
        units = write_units_for(max(before, after), transactional=True) + write_units_for(
            kept, transactional=True
        )
        memory = self.sizer.memory_bytes(c)
        if memory:
            # The served memory is put over the previous one: billed on the larger.
            units += write_units_for(max(memory_before, memory), transactional=True)
        self.day.write(c, at, units, "compaction:commit")
        self.day.bytes_written += kept + memory


# -- the figure ----------------------------------------------------------------------------


def simulate(
    conversations: int = 10_000,
    seed: int = SEED,
    shape: DayShape | None = None,
    durations: Durations | None = None,
    *,
    memory_item: bool = MEMORY_SK is not None,
) -> tuple[list[Conversation], Day]:
    """The day, run: its conversations (with their final state) and what it wrote."""
    shape = shape or DayShape()
    durations = durations or Durations()
    settings = load_settings({})
    size_rng = derived_rng("scale_day", seed, "messages")
    samples = pools(size_rng, settings)
    sizer = StateSizer(
        chars_per_token(size_rng), settings.memory_summary_max_tokens, memory_item=memory_item
    )
    planned = plan(conversations, seed, shape)
    simulation = Simulation(
        planned, shape, durations, settings, samples, sizer, derived_rng("scale_day", seed, "run")
    )
    return planned, simulation.run()


def peak_concurrency(intervals: list[tuple[float, float, str]], function: str | None = None) -> int:
    """The most invocations running at one instant (an end frees its slot before a start)."""
    edges = sorted(
        edge
        for start, end, name in intervals
        if function is None or name == function
        for edge in ((start, 1), (end, -1))
    )
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def hottest(day: Day, conversations: list[Conversation]) -> dict[str, Any]:
    """The partition and second with the most write units, table or index."""
    (number, second), table_units = max(day.table_wru.items(), key=lambda kv: kv[1])
    index = max(day.index_wru.items(), key=lambda kv: kv[1], default=None)
    c = conversations[number]
    found = {
        "kind": "conversation",
        "style": c.style,
        "partition_key": c.partition,
        "second": second,
        "wru": table_units,
        "writes": [f"{call} {units}" for call, units in day.detail[(number, second)]],
    }
    if index is not None and index[1] > table_units:
        (tenant, shard, second), units = index
        found = {
            "kind": "index_shard",
            "style": None,
            "partition_key": contacts_shard(tenant_id(tenant), shard),
            "second": second,
            "wru": units,
            "writes": [f"contacts index entry {units}"],
        }
    return found


def per_second(counts: Counter[Any], second_of: Callable[[Any], int]) -> Counter[int]:
    totals: Counter[int] = Counter()
    for key, units in counts.items():
        totals[second_of(key)] += units
    return totals


def cost(day: Day, durations: Durations) -> dict[str, float]:
    """The day's cost in USD, by service, from bench/prices.py."""
    wru = sum(day.table_wru.values()) + sum(day.index_wru.values())
    calls = day.calls["converse"] + day.calls["reply"]
    gb_seconds = sum(end - start for start, end, _ in day.invocations) * durations.memory_mb / 1024
    idle_polls = SQS_IDLE_POLLERS * DAY_SECONDS / SQS_LONG_POLL_SECONDS
    parts = {
        "dynamodb_writes": wru * prices.DYNAMODB_USD_PER_MILLION_WRU / 1e6,
        "dynamodb_reads": day.rru * prices.DYNAMODB_USD_PER_MILLION_RRU / 1e6,
        "lambda_requests": len(day.invocations) * prices.LAMBDA_USD_PER_MILLION_REQUESTS / 1e6,
        "lambda_duration": gb_seconds * prices.LAMBDA_USD_PER_GB_SECOND_ARM,
        "api_gateway": calls * prices.API_GATEWAY_HTTP_USD_PER_MILLION / 1e6,
        "sqs": (day.sqs_requests + idle_polls) * prices.SQS_USD_PER_MILLION_REQUESTS / 1e6,
    }
    rounded = {name: round(value, 4) for name, value in parts.items()}
    rounded["total"] = round(sum(parts.values()), 4)
    return rounded


def figures(
    conversations: list[Conversation], day: Day, seed: int, durations: Durations
) -> dict[str, Any]:
    top = hottest(day, conversations)
    index_top = max(day.index_wru.values(), default=0)
    table_per_second = per_second(day.table_wru, lambda key: key[1])
    for (_, _, second), units in day.index_wru.items():
        table_per_second[second] += units
    calls_per_second = Counter(
        int(start) for start, _, name in day.invocations if name == "converse"
    )
    contact_messages = sum(c.messages_sent for c in conversations)
    busiest_by_style: dict[str, int] = {}
    for (number, _), units in day.table_wru.items():
        style = conversations[number].style
        busiest_by_style[style] = max(busiest_by_style.get(style, 0), units)
    delays = day.compaction_delays or [0.0]
    wru = sum(day.table_wru.values()) + sum(day.index_wru.values())
    exchanges = contact_messages - day.calls["refused"]
    return {
        "conversations": len(conversations),
        "exchanges": exchanges,
        "contact_messages_refused": day.calls["refused"],
        "contact_messages_escalated": day.calls["escalated"],
        "converse_calls": day.calls["converse"],
        "reply_calls": day.calls["reply"],
        "compactions": day.calls["compactions"],
        "memory_in_own_item": day.memory_item,
        "hottest_partition_wru_per_second": top["wru"],
        "hottest_partition": top,
        "hottest_partition_share_of_limit": round(top["wru"] / PARTITION_LIMIT_WRU, 4),
        "partition_limit_wru_per_second": PARTITION_LIMIT_WRU,
        "hottest_wru_per_second_by_style": dict(sorted(busiest_by_style.items())),
        "hottest_index_shard_wru_per_second": index_top,
        "index_wru": sum(day.index_wru.values()),
        "table_peak_wru_per_second": max(table_per_second.values()),
        "wru": wru,
        "wru_per_exchange": round(wru / max(1, exchanges), 2),
        "rru": round(day.rru, 1),
        "peak_lambda_concurrency": peak_concurrency(day.invocations),
        "peak_converse_concurrency": peak_concurrency(day.invocations, "converse"),
        "peak_compactor_concurrency": peak_concurrency(day.invocations, "compactor"),
        "peak_calls_per_second": max(calls_per_second.values()),
        "compaction_delay_p50_s": round(percentile(delays, 50), 2),
        "compaction_delay_p99_s": round(percentile(delays, 99), 2),
        "gb_written": round(day.bytes_written / 1e9, 4),
        "day_cost_usd": cost(day, durations),
        "durations_ms": {
            "converse": durations.converse_ms,
            "reply": durations.reply_ms,
            "compaction": durations.compaction_ms,
            "compactor_overhead": durations.compactor_overhead_ms,
            "memory_mb": durations.memory_mb,
        },
        "prices": {"region": prices.REGION, "as_of": prices.AS_OF},
        "seed": seed,
    }


def run(conversations: int = 10_000, seed: int = SEED) -> dict[str, Any]:
    """`scale_day` in results.json: the simulated day's hottest partition, cost and concurrency."""
    durations = Durations()
    planned, day = simulate(conversations, seed, durations=durations)
    return figures(planned, day, seed, durations)
