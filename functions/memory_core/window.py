"""The history window (SPEC 5.5): trim, floor, budget by whole exchanges, hard cap.

The window reads the candidate turns newest first, lazily, and stops as soon as
the next exchange cannot fit: it never reads more than `max_messages + 1`
turns, so its cost follows the window, not the conversation.

An exchange is a question (see `Turn.is_question`) with everything that follows
it up to the next question: the replies, tool calls and tool results. The
window is always a run of whole exchanges ending at the newest turn, except
that the newest exchange may still be open. It always starts on a question,
which is also what Bedrock Converse needs (a history that starts with an
answer or a tool result is rejected).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from memory_core.tokens import estimate_turn_tokens
from memory_core.trim import TrimShape, trim_turn
from memory_core.turns import Turn, TurnPosition


@dataclass(frozen=True, slots=True)
class WindowLimits:
    max_tokens: int
    max_messages: int
    floor_messages: int
    trim: TrimShape


@dataclass(frozen=True, slots=True)
class Window:
    turns: tuple[Turn, ...]
    """The kept history, oldest first, trimmed where needed."""
    dropped: int
    trimmed: int
    estimated_tokens: int
    passed_over: tuple[Turn, ...]
    """Turns the window read but did not keep, newest first (for the coverage check)."""

    @property
    def kept(self) -> int:
        return len(self.turns)

    @property
    def oldest_position(self) -> TurnPosition | None:
        return self.turns[0].position if self.turns else None


@dataclass(frozen=True, slots=True)
class _Entry:
    original: Turn
    turn: Turn
    tokens: int

    @property
    def was_trimmed(self) -> bool:
        return self.turn is not self.original


class _Reader:
    """Pulls candidates one at a time, trimming each as it is read."""

    def __init__(self, newest_first: Iterable[Turn], trim: TrimShape) -> None:
        self._source: Iterator[Turn] = iter(newest_first)
        self._trim = trim
        self.read: list[_Entry] = []

    def pull(self) -> _Entry | None:
        original = next(self._source, None)
        if original is None:
            return None
        turn = trim_turn(original, self._trim)
        entry = _Entry(original, turn, estimate_turn_tokens(turn))
        self.read.append(entry)
        return entry


def build_window(
    newest_first: Iterable[Turn],
    limits: WindowLimits,
    candidate_count: int | None = None,
) -> Window:
    """Choose the history to hand the model from the candidates, newest first.

    `newest_first` holds history only: the current message is never part of it.
    `candidate_count`, when the caller knows it, makes `dropped` count every
    candidate left out; without it (or when it is below what was read),
    `dropped` counts the candidates read and left out.
    """
    reader = _Reader(newest_first, limits.trim)
    kept = _floor(reader, limits)
    # Extending past turns the floor had to give up would leave a hole in the
    # history: only a floor that kept everything it read may grow.
    if kept and len(kept) == len(reader.read):
        _extend_by_whole_exchanges(reader, kept, limits)
    return _result(reader, kept, candidate_count)


def _floor(reader: _Reader, limits: WindowLimits) -> list[_Entry]:
    """The newest `floor` messages, the old edge moved outward onto a question.

    Where landing on a question would break the hard cap, the unfinished
    exchange at the old edge is dropped instead.
    """
    kept: list[_Entry] = []
    while len(kept) < limits.floor_messages and (entry := reader.pull()):
        kept.append(entry)
    while kept and not kept[-1].turn.is_question and len(kept) < limits.max_messages:
        entry = reader.pull()
        if entry is None:
            break
        kept.append(entry)
    while kept and not kept[-1].turn.is_question:
        kept.pop()
    return kept


def _extend_by_whole_exchanges(reader: _Reader, kept: list[_Entry], limits: WindowLimits) -> None:
    tokens = sum(entry.tokens for entry in kept)
    exchange: list[_Entry] = []
    exchange_tokens = 0
    while entry := reader.pull():
        exchange.append(entry)
        exchange_tokens += entry.tokens
        if len(kept) + len(exchange) > limits.max_messages:
            return
        if tokens + exchange_tokens > limits.max_tokens:
            return
        if entry.turn.is_question:
            kept.extend(exchange)
            tokens += exchange_tokens
            exchange, exchange_tokens = [], 0


def _result(reader: _Reader, kept: list[_Entry], candidate_count: int | None) -> Window:
    kept_count = len(kept)
    passed_over = tuple(entry.original for entry in reader.read[kept_count:])
    total = max(len(reader.read), candidate_count or 0)
    return Window(
        turns=tuple(entry.turn for entry in reversed(kept)),
        dropped=total - kept_count,
        trimmed=sum(1 for entry in kept if entry.was_trimmed),
        estimated_tokens=sum(entry.tokens for entry in kept),
        passed_over=passed_over,
    )
