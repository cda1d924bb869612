"""The history window (SPEC 5.5): trim, floor, budget by whole exchanges, hard cap.

The window reads the candidate turns newest first, lazily, and stops as soon as
the next exchange cannot fit: it reads at most `max_messages + 1` turns, so
its cost follows the window, not the conversation. The one exception is an
exchange longer than the cap (SPEC 5.5.7): then it reads back to that
exchange's question, which it must show.

An exchange is a question (see `Turn.is_question`) with everything that follows
it up to the next question: the replies, tool calls and tool results. The
window is always a run of whole exchanges ending at the newest turn, except
that the newest exchange may still be open. It always starts on a question,
which is also what Bedrock Converse needs (a history that starts with an
answer or a tool result is rejected). When no question can be reached within
the cap, the window is the exchange's question, a visible count of the
messages left out, and the newest messages of the exchange from an answer on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memory_core.tokens import (
    block_units,
    content_units,
    estimate_content_tokens,
    estimate_turn_tokens,
    text_units,
    tokens_to_units,
    units_to_tokens,
)
from memory_core.trim import TrimShape, trim_costed_text, trim_turn
from memory_core.turns import ContentBlock, Turn, TurnPosition

NO_QUESTION_MARKER = "… the question that opened this exchange is not in the history …"


def exchange_omission_marker(omitted_messages: int) -> str:
    return f"… {omitted_messages} messages of this exchange omitted …"


@dataclass(frozen=True, slots=True)
class WindowLimits:
    max_tokens: int
    max_messages: int
    floor_messages: int
    trim: TrimShape


@dataclass(frozen=True, slots=True)
class ExchangeOmission:
    """SPEC 5.5.7: the middle of an exchange longer than the cap, left out visibly."""

    omitted: int
    """The exchange's messages between its question and the newest ones kept."""
    question_kept: bool
    """False when the exchange's question is not a candidate (older than the history
    range, or the conversation opened with the agent's messages)."""

    def block(self) -> ContentBlock:
        lines = [] if self.question_kept else [NO_QUESTION_MARKER]
        if self.omitted or self.question_kept:
            lines.append(exchange_omission_marker(self.omitted))
        return {"text": "\n".join(lines)}


@dataclass(frozen=True, slots=True)
class Window:
    turns: tuple[Turn, ...]
    """The kept history, oldest first, trimmed where needed."""
    dropped: int
    estimated_tokens: int
    """Of the history messages, the omission marker included."""
    passed_over: tuple[Turn, ...]
    """Turns the window read but did not keep, newest first (for the coverage check)."""
    omission: ExchangeOmission | None = None
    """Set when the window holds an exchange longer than the cap: `turns` then starts
    with its question (when it is kept), and the newest of the exchange follow."""
    turn_tokens: tuple[int, ...] = ()
    """Each kept turn's estimate as kept (trimmed), oldest first, like `turns`."""
    trimmed_turns: tuple[bool, ...] = ()
    """Whether each kept turn was trimmed, oldest first, like `turns`."""
    floor_kept: int = field(kw_only=True)
    """How many of the newest turns the floor alone kept (0 with an omission): no
    window of these candidates may keep fewer. Always given: a default would hide a
    window built without one."""

    @property
    def trimmed(self) -> int:
        return sum(self.trimmed_turns)

    @property
    def kept(self) -> int:
        return len(self.turns)

    def messages(self) -> list[dict[str, Any]]:
        """The history as Converse messages, oldest first, the omission marker in place.

        The marker closes the question's message, or opens the history as a
        `user` message of its own where the question is not kept.
        """
        messages = [turn.as_message() for turn in self.turns]
        if self.omission is not None:
            marker = self.omission.block()
            if self.omission.question_kept:
                messages[0]["content"].append(marker)
            else:
                messages.insert(0, {"role": "user", "content": [marker]})
        return messages

    @property
    def oldest_position(self) -> TurnPosition | None:
        return self.turns[0].position if self.turns else None


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

    The turns read are kept in parallel lists (the original, the trimmed
    turn, its estimate, whether it is a question), and the window is always
    a prefix of them: `kept` is a count. This runs once per converse call
    over at most `max_messages + 1` turns, so its per-turn cost is the
    window's cost (see docs/performance.md).
    """
    read = _Read(newest_first, limits.trim)
    kept = _floor(read, limits)
    if not kept and read.originals:
        # No question within the cap: one exchange is longer than the cap.
        return _long_exchange(read, limits, candidate_count)
    # Extending past turns the floor had to give up would leave a hole in the
    # history: only a floor that kept everything it read may grow.
    floor_kept = kept
    if kept and kept == len(read.originals):
        kept = _extend_by_whole_exchanges(read, kept, limits)
    return _result(read, kept, candidate_count, floor_kept=floor_kept)


class _Read:
    """The candidates read so far, newest first, each trimmed and estimated once."""

    __slots__ = (
        "_max_tokens",
        "_max_units",
        "_next",
        "_trim",
        "originals",
        "questions",
        "tokens",
        "turns",
    )

    def __init__(self, newest_first: Iterable[Turn], trim: TrimShape) -> None:
        self._next = iter(newest_first).__next__
        self._trim = trim
        self._max_tokens = trim.max_message_tokens
        self._max_units = tokens_to_units(trim.max_message_tokens)
        self.originals: list[Turn] = []
        self.turns: list[Turn] = []
        self.tokens: list[int] = []
        self.questions: list[bool] = []

    def pull(self) -> bool:
        """Read one more candidate; False when there is none left."""
        try:
            original = self._next()
        except StopIteration:
            return False
        content = original.content
        turn = original
        if len(content) == 1 and "text" in (block := content[0]):
            # The usual turn, one text block: its estimate, question-ness and trim inline
            # (a block is one kind, the API refuses a text block with other keys). A
            # trimmed text is never read again: the trim adds up what it kept.
            text = block["text"]
            units = text_units(text) if original.cost_units is None else original.cost_units
            question = original.role == "user" and bool(text)
            if units > self._max_units:
                kept, units = trim_costed_text(text, units, self._trim, original.text_cut)
                if kept is not text:
                    turn = original.with_content([{**block, "text": kept}])
            tokens = units_to_tokens(units)
        else:
            tokens = estimate_turn_tokens(original)
            question = original.is_question
            if tokens > self._max_tokens:
                turn = trim_turn(original, self._trim)
                if turn is not original:
                    tokens = estimate_content_tokens(turn.content)
                    question = turn.is_question
        self.originals.append(original)
        self.turns.append(turn)
        self.tokens.append(tokens)
        self.questions.append(question)
        return True


def _floor(read: _Read, limits: WindowLimits) -> int:
    """The newest `floor` messages, the old edge moved outward onto a question.

    Where landing on a question would break the hard cap, the unfinished
    exchange at the old edge is dropped instead.
    """
    kept = 0
    while kept < limits.floor_messages and read.pull():
        kept += 1
    questions = read.questions
    while kept and not questions[kept - 1] and kept < limits.max_messages:
        if not read.pull():
            break
        kept += 1
    while kept and not questions[kept - 1]:
        kept -= 1
    return kept


def _extend_by_whole_exchanges(read: _Read, kept: int, limits: WindowLimits) -> int:
    """`kept` grown by whole exchanges while the cap and the budget allow."""
    tokens = sum(read.tokens[:kept])
    exchange_tokens = 0
    estimates, questions = read.tokens, read.questions
    while read.pull():
        index = len(estimates) - 1
        exchange_tokens += estimates[index]
        if index + 1 > limits.max_messages or tokens + exchange_tokens > limits.max_tokens:
            break
        if questions[index]:
            kept = index + 1
            tokens += exchange_tokens
            exchange_tokens = 0
    return kept


def _long_exchange(read: _Read, limits: WindowLimits, candidate_count: int | None) -> Window:
    """SPEC 5.5.7: the exchange's question, a marker, then its newest messages from an answer.

    Everything read so far belongs to the exchange; reading goes on back to its
    question. The newest messages of the exchange are kept as the floor is
    (`floor` of them even over the budget, the edge moved onto an `assistant`
    message, outward if the cap allows, else inward), then grown message by
    message while the cap (the question counted) and the budget (the question
    and the marker counted) allow. An edge on an `assistant` message keeps
    every toolResult with its toolUse.
    """
    question = _pull_to_question(read)
    end = len(read.originals) if question is None else question
    room = min(limits.max_messages - 1, end)
    run = min(limits.floor_messages, room)
    answers = [turn.role == "assistant" for turn in read.turns[:end]]
    while run and not answers[run - 1] and run < room:
        run += 1
    # Where the cap stopped that on a result, the edge moves in, and the growth below
    # finds no answer to stop on between it and the cap: nothing is added.
    while run and not answers[run - 1]:
        run -= 1

    def omission(run: int) -> ExchangeOmission:
        return ExchangeOmission(end - run, question is not None)

    # The question's message carries the marker: it is estimated with it, at once.
    question_units = 0 if question is None else content_units(read.turns[question].content)

    def opening_tokens(run: int) -> int:
        return units_to_tokens(question_units + block_units(omission(run).block()))

    tokens = sum(read.tokens[:run])
    pending = 0
    for index in range(run, room):
        pending += read.tokens[index]
        if tokens + pending + opening_tokens(index + 1) > limits.max_tokens:
            break
        if answers[index]:
            run, tokens, pending = index + 1, tokens + pending, 0
    return _result(
        read,
        run,
        candidate_count,
        question=question,
        omission=omission(run),
        opening_tokens=opening_tokens(run),
        floor_kept=0,
    )


def _pull_to_question(read: _Read) -> int | None:
    """Read on to the nearest question; its index, or None when the candidates run out.

    Nothing read so far is a question (the floor found none within the cap).
    """
    while read.pull():
        if read.questions[-1]:
            return len(read.questions) - 1
    return None


def _result(
    read: _Read,
    kept: int,
    candidate_count: int | None,
    *,
    question: int | None = None,
    omission: ExchangeOmission | None = None,
    opening_tokens: int = 0,
    floor_kept: int,
) -> Window:
    """The window of the newest `kept` turns read, and (SPEC 5.5.7) the long exchange's question.

    `opening_tokens` is the estimate of the message the marker goes into
    (the question's, or its own), which `read.tokens` does not hold.
    """
    originals, turns = read.originals, read.turns
    window = turns[:kept]
    window.reverse()
    passed_over = originals[kept:]
    if question is not None:
        # The question is the last turn read: everything between is the omitted middle.
        window.insert(0, turns[question])
        passed_over = originals[kept:question]
    kept_indexes = (
        [*reversed(range(kept))] if question is None else [question, *reversed(range(kept))]
    )
    trimmed_turns = tuple(turns[n] is not originals[n] for n in kept_indexes)
    total = max(len(originals), candidate_count or 0)
    return Window(
        turns=tuple(window),
        dropped=total - len(window),
        estimated_tokens=sum(read.tokens[:kept]) + opening_tokens,
        passed_over=tuple(passed_over),
        omission=omission,
        turn_tokens=tuple(read.tokens[n] for n in kept_indexes),
        trimmed_turns=trimmed_turns,
        floor_kept=floor_kept,
    )
