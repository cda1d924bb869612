"""What the model reported for one reply: Bedrock Converse's `usage`, by its own names.

Bedrock counts the tokens it read from its prompt cache (`cacheReadInputTokens`)
and the ones it wrote to it (`cacheWriteInputTokens`) apart from `inputTokens`,
the prompt tokens it processed in full; the cache fields are absent when the
request used no cache. What was reported is kept as reported: an absent field
stays absent in the store, and counts 0 only where the figures are summed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_TOKENS = 2**31 - 1
"""Bedrock's `TokenUsage` members are 32-bit integers: no model reports more."""

_NAMES = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "total_tokens": "totalTokens",
    "cache_read_input_tokens": "cacheReadInputTokens",
    "cache_write_input_tokens": "cacheWriteInputTokens",
}
CONVERSE_NAMES = tuple(_NAMES.values())
"""The members of Converse's `usage`, as the API and Bedrock's JSON spell them."""


@dataclass(frozen=True, slots=True)
class TokenUsage:
    input_tokens: int
    output_tokens: int
    total_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None

    @property
    def cache_read(self) -> int:
        return self.cache_read_input_tokens or 0

    @property
    def cache_write(self) -> int:
        return self.cache_write_input_tokens or 0

    def as_json(self) -> dict[str, int]:
        """Converse's names, the fields that were reported only."""
        return {
            name: value
            for attribute, name in _NAMES.items()
            if (value := getattr(self, attribute)) is not None
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> TokenUsage:
        """From Converse's names (as `as_json` wrote them, or as validated at the edge)."""
        return cls(
            **{
                attribute: int(value[name])
                for attribute, name in _NAMES.items()
                if value.get(name) is not None
            }
        )
