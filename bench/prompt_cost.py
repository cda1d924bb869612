"""What each converse call's prompt costs with Bedrock's prompt cache, side by side.

One seeded session of `pairs` exchanges (the contact's message through
`converse`, the agent's reply through `/turns`) runs through the real service
and compactor on the in-memory adapters (`play` in `tests/support/simulation.py`),
the fold one exchange behind. The transcript is the same for every policy; two
arrival patterns time it: `active` (the contact answers within minutes, the
agent within seconds) and `idle` (every pause over ten minutes, so over the
5-minute TTL). Every converse call's prompt is the agent's own system prompt
(`AGENT_PROMPT_TOKENS`, no cache point of its own) followed by what the policy
hands the model:

- `stable`: the service's fragment with `promptCache: stable`, every cache point as served;
- `sliding` (the baseline): the fragment with `promptCache: sliding`, only the cache
  point after the memory kept (the seed's sliding window, with its single point);
- `trim_messages`: LangChain's `trim_messages` over the whole transcript and the
  current message, within the service's history budget, a cache point after the last;
- `unbounded`: every message so far and the current one, a cache point after the last;
- `sliding_two_points` (informational): the `sliding` fragment with its points as served.

Each prompt is priced with `bench.bedrock_cache.PromptCache` (a fresh cache per
policy, pattern and model) at the time it is sent, for Claude Sonnet and Nova
Lite: a cost in input-token equivalents (an uncached input token costs 1).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from bench.bedrock_cache import (
    CLAUDE_SONNET,
    NOVA_LITE,
    Block,
    CacheModel,
    Priced,
    Prompt,
    PromptCache,
)
from bench.common import REPO_ROOT, SEED
from memory_core.settings import load_settings
from memory_core.tokens import (
    block_units,
    estimate_tokens,
    text_units,
    tokens_to_units,
    units_to_tokens,
)
from memory_core.trim import longest_within
from tests.support.simulation import Exchange, SimulatedClock, Simulation, play

AGENT_PROMPT_TOKENS = 1500
"""The agent's own system prompt, before everything of ours."""
LAG_TURNS = 2
"""One exchange behind: the compactor serves a request while the next exchange arrives."""
PLOT_PATH = REPO_ROOT / "docs" / "prompt-cost.png"
START = datetime(2026, 6, 1, 8, tzinfo=UTC).timestamp()
"""When the session starts: fixed, so the fold's summaries (they carry dates) repeat."""

MODELS: dict[str, CacheModel] = {"claude": CLAUDE_SONNET, "nova": NOVA_LITE}
PATTERNS = ("active", "idle")
POLICIES = ("stable", "sliding", "trim_messages", "unbounded", "sliding_two_points")
SERIES_OF = ("claude", "active")
"""The one model and pattern whose per-call costs are kept for the plot."""
ROLLING_CALLS = 10

Message = dict[str, Any]

# -- the session ---------------------------------------------------------------

_WORDS = tuple(
    " ".join(
        (
            "the order invoice account delivery refund address payment date week team",
            "please could would we you it is was can not yet still also thanks again",
            "price plan upgrade contract renewal ticket support email phone number",
            "march april may june monday friday morning afternoon before after since",
            "sent received checked changed updated confirmed missing wrong right new old",
        )
    ).split()
)


def chat_text(rng: random.Random, tokens: int) -> str:
    """Sentences of plain words, cut to the longest head within `tokens` by the service's estimate.

    That is `tokens` exactly: none of their characters (letters, spaces, full stops)
    costs more than a token, so the head falls short of `tokens` by less than one.
    """
    budget = tokens_to_units(tokens)
    sentences: list[str] = []
    units = 0
    while units <= budget:
        words = rng.choices(_WORDS, k=rng.randint(6, 18))
        sentences.append(" ".join(words).capitalize() + ".")
        units += text_units(sentences[-1] + " ")
    text = " ".join(sentences)
    return text[: longest_within(text, budget)]


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def transcript(pairs: int, seed: int) -> list[tuple[str, str]]:
    """(the contact's message, the agent's reply) for each exchange.

    The contact's messages are 20 to 300 tokens (shorter ones more often), one
    in thirty a pasted document of 1,500 to 4,000; the replies 50 to 600. The
    sizes are drawn apart from the words, so the words never move them.
    """
    sizes = random.Random(f"{seed}:prompt_cost:sizes")
    words = random.Random(f"{seed}:prompt_cost:words")
    exchanges = []
    for _ in range(pairs):
        pasted = sizes.random() < 1 / 30
        asked = sizes.randint(1500, 4000) if pasted else _log_uniform(sizes, 20, 300)
        replied = _log_uniform(sizes, 50, 600)
        exchanges.append((chat_text(words, asked), chat_text(words, replied)))
    return exchanges


def timings(pairs: int, pattern: str, seed: int) -> list[tuple[float, float]]:
    """(asked at, replied at), epoch seconds, for each exchange of `pattern`.

    The reply follows its message by 3 to 20 seconds; the next message follows
    the reply by 20 seconds to 4 minutes (`active`) or 10 to 60 minutes (`idle`).
    """
    pause = {"active": (20.0, 240.0), "idle": (600.0, 3600.0)}[pattern]
    rng = random.Random(f"{seed}:prompt_cost:{pattern}")
    times = []
    replied = START
    for _ in range(pairs):
        asked = replied + rng.uniform(*pause)
        replied = asked + rng.uniform(3.0, 20.0)
        times.append((asked, replied))
    return times


def exchanges(pairs: int, pattern: str, seed: int) -> list[Exchange]:
    return [
        Exchange(question, asked, reply, replied)
        for (question, reply), (asked, replied) in zip(
            transcript(pairs, seed), timings(pairs, pattern, seed), strict=True
        )
    ]


def service_answers(
    session: Sequence[Exchange], prompt_cache: str, lag: int = LAG_TURNS
) -> tuple[list[dict[str, Any]], int]:
    """The converse answers of a tenant with this `promptCache`, and the compactions run."""
    clock = SimulatedClock(START)
    sim = Simulation.with_settings(
        load_settings({}), tenant_rules={"promptCache": prompt_cache}, clock=clock
    )
    answers = play(sim, clock, session, lag)
    return answers, len(sim.observed.compactions)


# -- the prompts ---------------------------------------------------------------


def agent_system_block(tokens: int = AGENT_PROMPT_TOKENS) -> Message:
    return {"text": chat_text(random.Random("agent system prompt"), tokens)}


def block_key(role: str, block: Mapping[str, Any]) -> str:
    """A block as the cache knows it: its role (or `system`) and its JSON, digested."""
    encoded = json.dumps([role, block], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(encoded.encode(), digest_size=16).hexdigest()


def block_tokens(block: Mapping[str, Any]) -> int:
    """The service's estimate of the block's text (a tool block's JSON), in tokens."""
    return units_to_tokens(block_units(block))


def as_prompt(system: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]) -> Prompt:
    """A Converse request's system and messages as the cache model's blocks and points.

    Every content block is a block; a `cachePoint` block is none: it marks a
    point after the block before it, with its `ttl` (Bedrock's default "5m" when absent).
    """
    blocks: list[Block] = []
    points: list[tuple[int, str]] = []
    placed = [("system", block) for block in system] + [
        (message["role"], block) for message in messages for block in message["content"]
    ]
    for role, block in placed:
        if "cachePoint" in block:
            if not blocks:
                raise ValueError("a cache point before any block")
            if points and points[-1][0] == len(blocks) - 1:
                raise ValueError("two cache points after one block")
            points.append((len(blocks) - 1, block["cachePoint"].get("ttl", "5m")))
        else:
            blocks.append(Block(block_key(role, block), block_tokens(block)))
    return Prompt(tuple(blocks), tuple(points))


def fragment_prompt(agent: Message, converse: Mapping[str, Any]) -> Prompt:
    """The agent's system prompt, then the answer's `converse` fragment, its points as served."""
    return as_prompt([agent, *converse["system"]], converse["messages"])


def without_history_points(converse: Mapping[str, Any]) -> dict[str, Any]:
    """The fragment with only its cache point after the memory: none left in `messages`."""
    messages = [
        {**message, "content": [b for b in message["content"] if "cachePoint" not in b]}
        for message in converse["messages"]
    ]
    return {"system": list(converse["system"]), "messages": messages}


def with_point_after_the_last(messages: Sequence[Message]) -> list[Message]:
    """`messages` with a cache point after the last one's blocks."""
    *before, last = messages
    point = {"cachePoint": {"type": "default"}}
    return [*before, {**last, "content": [*last["content"], point]}]


def converse_message(message: BaseMessage) -> Message:
    role = "user" if isinstance(message, HumanMessage) else "assistant"
    return {"role": role, "content": [{"text": message.content}]}


def estimate_messages(messages: Sequence[BaseMessage]) -> int:
    """The service's estimate over LangChain messages, each rounded up to a token on its own."""
    return sum(estimate_tokens(str(message.content)) for message in messages)


def trimmed(messages: Sequence[BaseMessage], max_tokens: int) -> list[Message]:
    """LangChain's `trim_messages` over the transcript and the current message (the last).

    When the current message alone is over the budget it keeps nothing; the
    current message is sent alone then, as it must be.
    """
    kept = trim_messages(
        list(messages),
        strategy="last",
        max_tokens=max_tokens,
        token_counter=estimate_messages,
        start_on="human",
        include_system=False,
    )
    if not kept or kept[-1] != messages[-1]:
        kept = [messages[-1]]
    return [converse_message(message) for message in kept]


def langchain_transcript(session: Sequence[Exchange]) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for exchange in session:
        messages += [HumanMessage(content=exchange.question), AIMessage(content=exchange.reply)]
    return messages


def client_side_prompts(
    agent: Message, session: Sequence[Exchange], max_tokens: int
) -> dict[str, list[Prompt]]:
    """The `trim_messages` and `unbounded` prompts of every converse call (timing plays no part)."""
    everything = langchain_transcript(session)
    system = [agent]
    trim: list[Prompt] = []
    unbounded: list[Prompt] = []
    # Each message's blocks once: the unbounded prompt grows by two a call.
    blocks = list(as_prompt(system, []).blocks)
    for n in range(len(session)):
        so_far = everything[: 2 * n + 1]  # the current message is the last
        trim.append(as_prompt(system, with_point_after_the_last(trimmed(so_far, max_tokens))))
        if n:
            blocks.append(_message_block(everything[2 * n - 1]))
        blocks.append(_message_block(everything[2 * n]))
        unbounded.append(Prompt(tuple(blocks), ((len(blocks) - 1, "5m"),)))
    return {"trim_messages": trim, "unbounded": unbounded}


def _message_block(message: BaseMessage) -> Block:
    converse = converse_message(message)
    (block,) = converse["content"]
    return Block(block_key(converse["role"], block), block_tokens(block))


# -- the figure ----------------------------------------------------------------


def priced(prompts: Sequence[Prompt], times: Sequence[float], model: CacheModel) -> list[Priced]:
    """Each prompt priced at its time, on one cache of its own."""
    cache = PromptCache(model)
    return [cache.price(prompt, at) for prompt, at in zip(prompts, times, strict=True)]


def policy_prompts(
    agent: Message,
    session: Sequence[Exchange],
    client_side: Mapping[str, list[Prompt]],
    lag: int,
) -> tuple[dict[str, list[Prompt]], dict[str, int]]:
    """Every policy's prompt at each converse call of `session`, and each service run's folds."""
    stable, stable_folds = service_answers(session, "stable", lag)
    sliding, sliding_folds = service_answers(session, "sliding", lag)
    prompts = {
        "stable": [fragment_prompt(agent, a["converse"]) for a in stable],
        "sliding": [fragment_prompt(agent, without_history_points(a["converse"])) for a in sliding],
        "trim_messages": client_side["trim_messages"],
        "unbounded": client_side["unbounded"],
        "sliding_two_points": [fragment_prompt(agent, a["converse"]) for a in sliding],
    }
    return prompts, {"stable": stable_folds, "sliding": sliding_folds}


def side_by_side(costs: Mapping[str, Sequence[Priced]]) -> dict[str, Any]:
    """Each policy's mean cost and cached share; how many times the stable window saves."""
    figures: dict[str, Any] = {}
    mean = {policy: sum(p.cost for p in priced) / len(priced) for policy, priced in costs.items()}
    for policy, priced in costs.items():
        read = sum(p.read_tokens for p in priced)
        total = sum(p.total_tokens for p in priced)
        figures[policy] = {
            "cost_per_converse": round(mean[policy], 2),
            "cached_read_share": round(read / total, 2),
            # What the policy shows the model: the price of a cheaper prompt is a shorter one.
            "prompt_tokens_per_converse": round(total / len(priced)),
        }
    for baseline in ("sliding", "trim_messages"):
        figures[f"saving_vs_{baseline}"] = round(mean[baseline] / mean["stable"], 2)
    return figures


def run(pairs: int = 250, seed: int = SEED, lag: int = LAG_TURNS) -> dict[str, Any]:
    """The figure for results.json: every model and pattern side by side, and one series."""
    max_tokens = load_settings({}).history_window_max_tokens
    agent = agent_system_block()
    figures: dict[str, Any] = {
        "turns": 2 * pairs,
        "seed": seed,
        "lag_turns": lag,
        "agent_prompt_tokens": block_tokens(agent),
        "history_window_max_tokens": max_tokens,
        "compactions": {},
        **{name: {} for name in MODELS},
    }
    # The transcript is the same in both patterns, and LangChain's side ignores the clock.
    client_side = client_side_prompts(agent, exchanges(pairs, PATTERNS[0], seed), max_tokens)
    series: dict[str, Any] = {"model": SERIES_OF[0], "pattern": SERIES_OF[1]}
    series["turn"] = [2 * n + 1 for n in range(pairs)]  # the contact's messages: odd turns
    for pattern in PATTERNS:
        session = exchanges(pairs, pattern, seed)
        prompts, figures["compactions"][pattern] = policy_prompts(agent, session, client_side, lag)
        times = [exchange.asked_at for exchange in session]
        for name, model in MODELS.items():
            costs = {policy: priced(prompts[policy], times, model) for policy in POLICIES}
            figures[name][pattern] = side_by_side(costs)
            if (name, pattern) == SERIES_OF:
                series.update({policy: [round(p.cost) for p in costs[policy]] for policy in costs})
    figures["series"] = series
    return figures


# -- the plot ------------------------------------------------------------------

_LABELS = {
    "unbounded": "every message so far",
    "trim_messages": "LangChain trim_messages, point after the last",
    "sliding": "sliding window, one point after the memory (baseline)",
    "sliding_two_points": "sliding window, points as served",
    "stable": "stable window, points as served (ours)",
}


def rolling_mean(values: Sequence[float], calls: int) -> list[float]:
    """The mean of each value and the `calls - 1` before it (fewer at the start)."""
    means, total = [], 0.0
    for n, value in enumerate(values):
        total += value
        if n >= calls:
            total -= values[n - calls]
        means.append(total / min(n + 1, calls))
    return means


def plot(figures: dict[str, Any], path: Path = PLOT_PATH) -> Path:
    """Cost per converse call over the session (Claude, active chat), every policy."""
    import matplotlib  # noqa: PLC0415 (only `make bench` plots)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    series = figures["series"]
    side_by_side = figures[series["model"]][series["pattern"]]
    figure, axes = plt.subplots(figsize=(8, 4.5), dpi=120)
    for policy in _plotted(series):
        mean = side_by_side[policy]["cost_per_converse"]
        axes.plot(
            series["turn"],
            rolling_mean(series[policy], ROLLING_CALLS),
            label=f"{_LABELS[policy]}: {mean:,.0f}",
        )
    axes.set_ylim(bottom=0)
    axes.set_xlabel("turn")
    axes.set_ylabel(f"input-token equivalents (mean of {ROLLING_CALLS} calls)")
    axes.set_title(
        f"Input cost per converse call, {figures['turns']} turns, Claude Sonnet, active chat:\n"
        f"stable is {side_by_side['saving_vs_sliding']:.2f}x cheaper than the sliding window, "
        f"{side_by_side['saving_vs_trim_messages']:.2f}x than trim_messages",
        fontsize=10,
    )
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left", fontsize=8, title="policy: mean per call", title_fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, metadata={"Software": None})
    plt.close(figure)
    return path


def _plotted(series: Mapping[str, Any]) -> Iterable[str]:
    return [policy for policy in _LABELS if policy in series]
