"""Summarisers behind one interface: Amazon Bedrock Converse, and an offline one.

Both fold incrementally: the previous summary and the turns it has not seen
yet, oldest first, become the new summary, so a compaction's input follows
the unfolded turns, not the conversation's length. A summariser that fails
raises: an error text must never become the memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memory_core.tokens import estimate_tokens, readable_texts, tokens_to_chars
from memory_core.trim import TrimShape, trim_text
from memory_core.turns import Turn

SYSTEM_PROMPT = (
    "You maintain the running memory of one conversation between a contact and an "
    "assistant, for the assistant to read before its next reply. Fold the new turns "
    "into the previous summary. Keep every party and person named, every number, "
    "amount, date and deadline, every commitment made by either side, and every "
    "question still open; drop greetings and repetition. Write plain sentences, "
    "oldest first, in the conversation's language. Reply with the summary only."
)


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    input_tokens: int
    output_tokens: int


class SummariserError(RuntimeError):
    """The summariser produced nothing usable; the compaction must be retried."""


class Summariser(Protocol):
    def summarise(
        self, previous: str | None, turns: Sequence[Turn], max_tokens: int
    ) -> Summary: ...


def transcript(turns: Sequence[Turn]) -> str:
    """The turns as the summariser reads them: one labelled paragraph each, oldest first."""
    lines = []
    for turn in turns:
        if turn.returns_tool_results:
            speaker = "Tool result"
        else:
            speaker = "Contact" if turn.role == "user" else "Agent"
        body = " ".join(text for text in readable_texts(turn.content) if text)
        lines.append(f"[{turn.sent_at:%Y-%m-%d %H:%M}] {speaker}: {body}")
    return "\n".join(lines)


def cap_summary(text: str, max_tokens: int) -> str:
    """The summary within its token cap; a cut is marked, never silent."""
    return trim_text(text, TrimShape.for_budget(max_tokens))


class OfflineSummariser:
    """Deterministic and extractive, for the local runner and the tests.

    Each turn contributes its first sentence (at most 200 characters), dated
    and labelled; when the whole no longer fits the cap, the oldest points
    go first, and the summary says so.
    """

    POINT_CHARS = 200
    OMITTED = "(earlier points omitted)"

    def summarise(self, previous: str | None, turns: Sequence[Turn], max_tokens: int) -> Summary:
        points = [line for line in (previous or "").splitlines() if line and line != self.OMITTED]
        points += [self._point(line) for line in transcript(turns).splitlines()]
        # The newest points that fit, leaving room to say that older ones were left out.
        budget = tokens_to_chars(max_tokens) - len(self.OMITTED) - 1
        kept: list[str] = []
        size = 0
        for point in reversed(points):
            if kept and size + len(point) + 1 > budget:
                break
            kept.insert(0, point)
            size += len(point) + 1
        if len(kept) < len(points):
            kept.insert(0, self.OMITTED)
        text = cap_summary("\n".join(kept), max_tokens)
        input_tokens = estimate_tokens(previous or "") + estimate_tokens(transcript(turns))
        return Summary(text, input_tokens, estimate_tokens(text))

    def _point(self, line: str) -> str:
        head, _, rest = line.partition("] ")
        sentence = rest.split(". ")[0]
        if len(sentence) > self.POINT_CHARS:
            sentence = sentence[: self.POINT_CHARS - 1] + "…"
        return f"- {head.lstrip('[')}: {sentence}"


class BedrockRuntimeClient(Protocol):
    def converse(self, **kwargs: Any) -> dict[str, Any]: ...


class BedrockSummariser:
    """Amazon Bedrock Converse, with the model and its output cap from the settings."""

    def __init__(self, client: BedrockRuntimeClient, model_id: str) -> None:
        self._client = client
        self._model_id = model_id

    def request(
        self, previous: str | None, turns: Sequence[Turn], max_tokens: int
    ) -> dict[str, Any]:
        prompt = (
            f"<previous_summary>\n{previous or '(none yet)'}\n</previous_summary>\n"
            f"<new_turns>\n{transcript(turns)}\n</new_turns>\n"
            "Write the updated summary."
        )
        return {
            "modelId": self._model_id,
            "system": [{"text": SYSTEM_PROMPT}],
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": 0.0},
        }

    def summarise(self, previous: str | None, turns: Sequence[Turn], max_tokens: int) -> Summary:
        # Errors (throttling, validation, timeouts) propagate: the record fails and comes back.
        response = self._client.converse(**self.request(previous, turns, max_tokens))
        if response.get("stopReason") not in {"end_turn", "max_tokens", "stop_sequence"}:
            raise SummariserError(f"the model stopped with {response.get('stopReason')!r}")
        blocks = response.get("output", {}).get("message", {}).get("content", [])
        text = "".join(block.get("text", "") for block in blocks).strip()
        if not text:
            raise SummariserError("the model returned no summary text")
        usage = response.get("usage", {})
        return Summary(
            cap_summary(text, max_tokens),
            int(usage.get("inputTokens", 0)),
            int(usage.get("outputTokens", 0)),
        )
