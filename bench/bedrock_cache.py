"""A model of Amazon Bedrock's prompt cache, for pricing prompts side by side.

A model, not a bill: it follows what Bedrock documents for prompt caching with
Converse, as parameters (`CacheModel`), and prices each request in input-token
equivalents (an uncached input token costs 1):

- A `cachePoint` caches the prompt's prefix up to it (tools, then system, then
  messages), if that prefix reaches the model's minimum (counted from the
  start); at most `max_points` a request.
- A cached prefix lives `ttl` seconds from its write, and every hit resets it.
- A request reads the longest cached prefix it shares with earlier ones: at one
  of its cache points, or (Claude) up to `lookback_blocks` blocks before one.
- What lies between that hit and the request's last cache point is written (a
  write costs `write` or `write_1h` times an input token); what follows the
  last cache point is plain input; the hit's prefix costs `read`.

Blocks are identified by a key that stands for their content, so two requests
share a prefix exactly when their first blocks have the same keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

TTL_SECONDS = {"5m": 300, "1h": 3600}


@dataclass(frozen=True, slots=True)
class CacheModel:
    """One model family's prompt-cache facts (Bedrock's documentation, as parameters)."""

    name: str
    read: float
    """A cached input token's price, in input tokens."""
    write: float
    """A token written to the cache with the 5-minute TTL, in input tokens."""
    write_1h: float
    minimum_tokens: int
    """The shortest prefix a cache point caches, counted from the prompt's start."""
    lookback_blocks: int
    """How many blocks before a cache point are checked for an earlier hit."""
    max_points: int = 4


CLAUDE_SONNET = CacheModel(
    "claude-sonnet", read=0.1, write=1.25, write_1h=2.0, minimum_tokens=1024, lookback_blocks=20
)
NOVA_LITE = CacheModel(
    "nova-lite", read=0.25, write=1.0, write_1h=1.0, minimum_tokens=1536, lookback_blocks=0
)


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of a prompt: what it holds (`key`) and its tokens."""

    key: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Prompt:
    """The blocks in prompt order, and after which of them a cache point sits (with its TTL)."""

    blocks: tuple[Block, ...]
    cache_points: tuple[tuple[int, str], ...] = ()
    """(index of the block the point follows, "5m" or "1h"), in prompt order."""


@dataclass(frozen=True, slots=True)
class Priced:
    read_tokens: int
    write_tokens: int
    uncached_tokens: int
    cost: float
    """In input-token equivalents."""

    @property
    def total_tokens(self) -> int:
        return self.read_tokens + self.write_tokens + self.uncached_tokens


@dataclass
class PromptCache:
    """The cache as one conversation's requests see it over time."""

    model: CacheModel
    _expiry: dict[tuple[str, ...], float] = field(default_factory=dict)

    def price(self, prompt: Prompt, at: float) -> Priced:
        """What `prompt`, sent at `at` seconds, costs; the cache is updated as Bedrock would."""
        points = prompt.cache_points
        if len(points) > self.model.max_points:
            raise ValueError(f"{len(points)} cache points; Bedrock accepts {self.model.max_points}")
        if any(b[0] <= a[0] for a, b in pairwise(points)):
            raise ValueError("cache points must follow distinct blocks, in prompt order")
        ends = _prefix_tokens(prompt.blocks)
        keys = tuple(block.key for block in prompt.blocks)
        hit = self._longest_hit(keys, points, at)
        cacheable = [
            (index, ttl) for index, ttl in points if ends[index] >= self.model.minimum_tokens
        ]
        hit_tokens = ends[hit] if hit is not None else 0
        if hit is not None:
            self._expiry[keys[: hit + 1]] = at + self._ttl_of(hit, points)
        write_cost = 0.0
        written_until = hit_tokens
        for index, ttl in cacheable:
            prefix = keys[: index + 1]
            if hit is not None and index <= hit:
                continue
            tokens = ends[index] - written_until
            rate = self.model.write_1h if ttl == "1h" else self.model.write
            write_cost += tokens * rate
            written_until = ends[index]
            self._expiry[prefix] = at + TTL_SECONDS[ttl]
        total = ends[-1] if ends else 0
        write_tokens = written_until - hit_tokens
        uncached = total - written_until
        cost = hit_tokens * self.model.read + write_cost + uncached
        return Priced(hit_tokens, write_tokens, uncached, cost)

    def _longest_hit(
        self, keys: tuple[str, ...], points: Sequence[tuple[int, str]], at: float
    ) -> int | None:
        """The last block of the longest live cached prefix this prompt can read, if any."""
        best: int | None = None
        for index, _ in points:
            lowest = max(0, index - self.model.lookback_blocks)
            for candidate in range(index, lowest - 1, -1):
                expiry = self._expiry.get(keys[: candidate + 1])
                if expiry is not None and expiry > at:
                    if best is None or candidate > best:
                        best = candidate
                    break
        return best

    @staticmethod
    def _ttl_of(hit: int, points: Sequence[tuple[int, str]]) -> int:
        # A hit is refreshed with the TTL of the cache point that reached it.
        for index, ttl in points:
            if index >= hit:
                return TTL_SECONDS[ttl]
        return TTL_SECONDS[points[-1][1]]


def _prefix_tokens(blocks: Sequence[Block]) -> list[int]:
    """Tokens from the prompt's start through each block."""
    ends: list[int] = []
    total = 0
    for block in blocks:
        total += block.tokens
        ends.append(total)
    return ends
