"""Summarisers behind one interface: Amazon Bedrock Converse, and an offline one.

Both fold incrementally: the previous summary and the turns it has not seen
yet, oldest first, become the new summary, so a compaction's input follows
the unfolded turns, not the conversation's length. A summariser that fails
raises: an error text must never become the memory.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import accumulate
from math import inf
from typing import Any, Protocol

from memory_core.tokens import (
    CHEAPEST_UNITS,
    estimate_tokens,
    readable_texts,
    text_units,
    tokens_to_units,
)
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

    The summary is a list of stretches, oldest first: a label with the
    stretch's dates and turn count, then a line a turn, its speaker and its
    first sentence (at most 200 characters)::

        [2026-11-01 09:01–09:12, 12 turns]
        - Contact: Is the fee 1,200 EUR?
        - … Agent: It is due on 15 March, as…
        - … Contact: Thanks.

    Each fold re-reads its own earlier output, adds the new turns as one
    stretch, and fits the whole within the cap. Older turns are compressed
    more, and no stretch is ever dropped:

    - an older stretch holding less than twice the turns of the next newer
      one is merged into it, so the turns a stretch stands for at least
      double with its age;
    - the stretches share the cap equally, except that an older one never
      gets more room than a newer one, nor more than half its room per turn;
    - a stretch over its share keeps all its points, shortened to their first
      words, or else fewer points spread evenly over its turns (its first and
      last kept); a shortened point ends with "…", and a line starting with
      "…" follows points left out (a lone "- …" when the last ones were);
    - when a share cannot show four points, the two oldest stretches are
      merged: the label keeps the dates and the turn count of both.

    The summary's estimate never exceeds the cap; below
    `MIN_STRUCTURED_TOKENS` it may be a label alone, cut with a visible "…".
    """

    POINT_CHARS = 200
    MIN_POINT_CHARS = 24
    """A point is not shortened below this: its speaker and a few words."""
    FEWEST_POINTS = 4
    """A stretch whose share cannot show this many points is merged, while another is left."""
    MIN_STRUCTURED_TOKENS = 49
    """From this cap up, every stretch shows its label and at least one point.

    The costliest label, `[YYYY-MM-DD hh:mm – YYYY-MM-DD hh:mm, 99999 turns]`,
    is 1,350 units: 29 digits at 32, 4 hyphens at 64, `[`, `]`, `,` and two
    `:` at 16, `turns` at 13 a letter, `–` 15 and 6 spaces at 1. A shortest
    point after a gap, and a gap after it (`\n- … ` + 24 + `\n- …`), 97 + 1,536
    + 96 more: the newlines 16, the hyphens 64, `…` 15, and the point's 24
    characters 64 each at most, a punctuation mark's, the costliest ASCII
    character's. 3,079 units, 49 tokens (48 are 3,072). A point in a costlier
    script (a Latin-1 letter costs 153) needs more. Below it the summary is
    still within its cap.
    """
    GAP = "…"
    LEGACY_GAP = "(earlier points omitted)"
    """The marker of this summariser's earlier, newest-points-only format, read as a gap."""

    _STAMP = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"
    _LABEL = re.compile(
        rf"\[(?P<start>earlier|{_STAMP})"
        rf"(?: – (?P<end>{_STAMP})|–(?P<end_time>\d{{2}}:\d{{2}}))?"
        r"(?:, (?P<turns>\d+) turns?)?\]"
    )
    _FEWEST_POINTS_CHARS = FEWEST_POINTS * (len("\n- … ") + MIN_POINT_CHARS) + len("\n- …")
    _WORD = re.compile(r"\S+")
    _SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]")

    @dataclass(frozen=True, slots=True)
    class _Stretch:
        start: str | None
        """`YYYY-MM-DD hh:mm`; None for a stretch of a summary written otherwise ("earlier")."""
        end: str | None
        turns: int | None
        """None when unknown: a summary this summariser did not write."""
        entries: tuple[str | None, ...]
        """Points, oldest first; None stands for points left out (a "- …" line)."""
        positions: tuple[float, ...]
        """Where each entry starts, in turns from the stretch's start."""
        span: float
        """The turns it covers (its entries, when the count is unknown)."""

    def summarise(self, previous: str | None, turns: Sequence[Turn], max_tokens: int) -> Summary:
        stretches = self._halving(self._read(previous or ""))
        if turns:
            stretches.append(self._stretch_of(turns))
        text = self._within(stretches, tokens_to_units(max_tokens))
        input_tokens = estimate_tokens(previous or "") + estimate_tokens(transcript(turns))
        return Summary(text, input_tokens, estimate_tokens(text))

    def _within(self, stretches: list[_Stretch], cap: int) -> str:
        """The longest layout whose cost is within `cap` units.

        The layout counts characters: at most as many as `cap` buys of the
        cheapest kind, or else the most characters that fit, found by halving.
        """

        def laid_out(limit: int) -> str:
            return self._clip(self._layout(stretches, limit), limit)

        fits, over = 0, cap // CHEAPEST_UNITS
        text = laid_out(over)
        if text_units(text) <= cap:
            return text
        best = ""
        while over - fits > 1:
            middle = (fits + over) // 2
            text = laid_out(middle)
            if text_units(text) <= cap:
                fits, best = middle, text
            else:
                over = middle
        return best

    # Reading and writing the format.

    def _stretch_of(self, turns: Sequence[Turn]) -> _Stretch:
        stamps = [self._stamp(turn.sent_at) for turn in turns]
        return self._Stretch(
            start=min(stamps),
            end=max(stamps),
            turns=len(turns),
            entries=tuple(self._point(turn) for turn in turns),
            positions=tuple(float(n) for n in range(len(turns))),
            span=float(len(turns)),
        )

    def _point(self, turn: Turn) -> str:
        _, _, line = transcript([turn]).partition("] ")
        speaker, _, body = line.partition(": ")
        words: list[str] = []
        size = 0
        for word in self._WORD.finditer(body):
            words.append(word.group())
            size += len(words[-1]) + 1
            if size > self.POINT_CHARS:
                break
        sentence = " ".join(words)
        end = self._SENTENCE_END.search(sentence)
        if end:
            sentence = sentence[: end.end()]
        return f"{speaker}: {self._truncate(sentence, self.POINT_CHARS) or '(no text)'}"

    def _read(self, previous: str) -> list[_Stretch]:
        """The stretches of a previous summary; text it did not write is one "earlier" stretch."""
        read: list[tuple[re.Match[str] | None, list[str | None]]] = []
        for raw in previous.splitlines():
            line = " ".join(self._WORD.findall(raw))
            label = self._LABEL.fullmatch(line)
            if label:
                read.append((label, []))
                continue
            if not line:
                continue
            if not read:
                read.append((None, []))
            if line in (f"- {self.GAP}", self.LEGACY_GAP):
                read[-1][1].append(None)
            elif line.startswith(f"- {self.GAP} "):
                read[-1][1].extend((None, line.removeprefix(f"- {self.GAP} ")))
            else:
                read[-1][1].append(line.removeprefix("- "))
        return [self._stretch_read(label, entries) for label, entries in read]

    def _stretch_read(self, label: re.Match[str] | None, entries: list[str | None]) -> _Stretch:
        start = end = None
        turns = None
        if label:
            start = None if label["start"] == "earlier" else label["start"]
            end = label["end"] or start
            if start and label["end_time"]:
                end = start[:11] + label["end_time"]
            turns = int(label["turns"] or 0) or None
        points = sum(entry is not None for entry in entries)
        gaps = len(entries) - points
        # Points left out are assumed spread evenly over the gaps (or over the points).
        if turns is None:
            weights = [1.0] * len(entries)
        elif gaps:
            left_out = max(0, turns - points) / gaps
            weights = [left_out if entry is None else 1.0 for entry in entries]
        else:
            weights = [turns / max(points, 1)] * points
        positions = list(accumulate(weights, initial=0.0))[:-1]
        span = float(turns) if turns is not None else float(len(entries))
        return self._Stretch(start, end, turns, tuple(entries), tuple(positions), span)

    def _label(self, stretch: _Stretch) -> str:
        start, end = stretch.start, stretch.end
        if start is None:
            dates = "earlier" if end is None else f"earlier – {end}"
        elif end is None or end == start:
            dates = start
        elif end[:10] == start[:10]:
            dates = f"{start}–{end[11:]}"
        else:
            dates = f"{start} – {end}"
        if stretch.turns is None:
            return f"[{dates}]"
        return f"[{dates}, {stretch.turns} turn{'' if stretch.turns == 1 else 's'}]"

    def _block(self, stretch: _Stretch, entries: tuple[str | None, ...]) -> str:
        """The label, then a line a point; a point after left-out ones starts with "…"."""
        lines = [self._label(stretch)]
        gap = False
        for entry in entries:
            if entry is None:
                gap = True
            else:
                lines.append(f"- {self.GAP} {entry}" if gap else f"- {entry}")
                gap = False
        if gap:
            lines.append(f"- {self.GAP}")
        return "\n".join(lines)

    @staticmethod
    def _stamp(at: datetime) -> str:
        return f"{at.year:04d}-{at.month:02d}-{at.day:02d} {at.hour:02d}:{at.minute:02d}"

    # Merging.

    def _merge(self, older: _Stretch, newer: _Stretch) -> _Stretch:
        starts = (older.start, newer.start)
        ends = [end for end in (older.end, newer.end) if end is not None]
        counts = (older.turns, newer.turns)
        return self._Stretch(
            start=None if None in starts else min(s for s in starts if s is not None),
            end=max(ends) if ends else None,
            turns=None if None in counts else sum(n for n in counts if n is not None),
            entries=older.entries + newer.entries,
            positions=older.positions + tuple(older.span + p for p in newer.positions),
            span=older.span + newer.span,
        )

    def _halving(self, stretches: list[_Stretch]) -> list[_Stretch]:
        """Each stretch holds at least twice the turns of the next newer one."""
        kept: list[OfflineSummariser._Stretch] = []
        for stretch in stretches:
            merged = stretch
            while kept and self._twice_at_most(kept[-1], merged):
                merged = self._merge(kept.pop(), merged)
            kept.append(merged)
        return kept

    @staticmethod
    def _twice_at_most(older: _Stretch, newer: _Stretch) -> bool:
        if older.turns is None or newer.turns is None:
            return False
        return older.turns < 2 * newer.turns

    # Fitting to the cap.

    def _layout(self, stretches: list[_Stretch], limit: int) -> str:
        while True:
            labels = sum(len(self._label(stretch)) for stretch in stretches)
            room = limit - labels - (len(stretches) - 1)
            needs = [self._cost(stretch.entries) for stretch in stretches]
            shares = self._shares(needs, self._weights(stretches), room)
            squeezed = room < 0 or any(
                share < min(need, self._FEWEST_POINTS_CHARS)
                for share, need in zip(shares, needs, strict=True)
            )
            if len(stretches) < 2 or not squeezed:
                break
            # Space ran out: the two oldest become one.
            stretches = [self._merge(stretches[0], stretches[1]), *stretches[2:]]
        bodies = [self._fit(s, share) for s, share in zip(stretches, shares, strict=True)]
        # What word boundaries and whole points left unused goes to the newest first.
        spare = room - sum(self._cost(body) for body in bodies)
        for n in reversed(range(len(stretches))):
            used = self._cost(bodies[n])
            if spare <= 0:
                break
            if used < needs[n]:
                refit = self._fit(stretches[n], used + spare)
                if self._cost(refit) > used:
                    spare -= self._cost(refit) - used
                    bodies[n] = refit
        return "\n".join(self._block(s, b) for s, b in zip(stretches, bodies, strict=True))

    @staticmethod
    def _weights(stretches: list[_Stretch]) -> list[float]:
        """Equal shares, but none above a newer stretch's, and at most half its room per turn."""
        weights = [0.0] * len(stretches)
        most, most_per_turn = 1.0, inf
        for n in reversed(range(len(stretches))):
            turns = stretches[n].turns
            weight = most if turns is None else min(most, turns * most_per_turn)
            weights[n] = most = weight
            if turns:
                most_per_turn = min(most_per_turn, weight / turns / 2)
        return weights

    @staticmethod
    def _shares(needs: list[int], weights: list[float], room: int) -> list[int]:
        """Room in proportion to the weights; what one needs less of goes to the others."""
        if room <= 0:
            return [0] * len(needs)

        def level_to_settle(n: int) -> float:
            return needs[n] / weights[n] if weights[n] else inf

        shares = [0] * len(needs)
        left, weight_left = room, sum(weights)
        for n in sorted(range(len(needs)), key=level_to_settle):
            level = left / weight_left if weight_left > 0 else 0.0
            shares[n] = min(needs[n], int(level * weights[n]))
            if shares[n] == needs[n]:  # settled: what it leaves goes to the others
                left -= needs[n]
                weight_left -= weights[n]
        return shares

    def _fit(self, stretch: _Stretch, room: int) -> tuple[str | None, ...]:
        """The stretch's entries within `room` characters: shortened, then fewer, points."""
        entries = stretch.entries
        if self._cost(entries) <= room:
            return entries
        width = self._widest(entries, room)
        if width is not None:
            return self._shortened(entries, width)
        points = [n for n, entry in enumerate(entries) if entry is not None]
        # Not even one point: the gap alone (cut further by `_clip` if even that is too long).
        best: tuple[str | None, ...] = (None,)
        low, high = 1, len(points) - 1
        while low <= high:
            count = (low + high) // 2
            sampled = self._sample(stretch, points, count)
            width = self._widest(sampled, room)
            if width is None:
                high = count - 1
            else:
                best = self._shortened(sampled, width)
                low = count + 1
        return best

    def _sample(self, stretch: _Stretch, points: list[int], count: int) -> tuple[str | None, ...]:
        """`count` points spread evenly over the stretch's turns, first and last kept."""
        at = [stretch.positions[n] for n in points]
        chosen: list[int] = []
        after = 0
        for k in range(count):
            target = at[0] + (at[-1] - at[0]) * k / (count - 1) if count > 1 else at[0]
            last = len(points) - (count - k)
            n = min(max(bisect_left(at, target, after, last + 1), after), last)
            if n > after and target - at[n - 1] <= at[n] - target:
                n -= 1
            chosen.append(points[n])
            after = n + 1
        sampled: list[str | None] = []
        previous = -1
        for n in [*chosen, len(stretch.entries)]:
            if n > previous + 1:
                sampled.append(None)
            if n < len(stretch.entries):
                sampled.append(stretch.entries[n])
            previous = n
        return tuple(sampled)

    def _widest(self, entries: tuple[str | None, ...], room: int) -> int | None:
        """The widest point length that fits `room`, not under MIN_POINT_CHARS; None if none."""
        if self._cost(entries, self.MIN_POINT_CHARS) > room:
            return None
        low = self.MIN_POINT_CHARS
        high = max((len(entry) for entry in entries if entry is not None), default=low)
        while low < high:
            width = (low + high + 1) // 2
            if self._cost(entries, width) <= room:
                low = width
            else:
                high = width - 1
        return low

    def _shortened(self, entries: tuple[str | None, ...], width: int) -> tuple[str | None, ...]:
        return tuple(None if entry is None else self._shorten(entry, width) for entry in entries)

    def _truncate(self, text: str, width: int, *, cut_before: bool = False) -> str:
        """At most `width` characters, cut after a word where one ends late enough, marked "…".

        A text `cut_before` keeps its mark however short it is.
        """
        if len(text) <= width and not cut_before:
            return text
        cut = text[: width - 1]
        space = cut.rfind(" ")
        inside_a_word = len(cut) < len(text) and cut[-1:].isalnum() and text[len(cut)].isalnum()
        if inside_a_word and space >= width // 2:
            cut = cut[:space]  # after a word, if one ends late enough
        return cut.rstrip(" ,;:") + self.GAP

    def _shorten(self, point: str, width: int) -> str:
        """A point in at most `width` characters: its first words, then "…".

        Shortening a shortened point again cuts the same text shorter, so
        repeated folds agree; the words kept are the point's first, never a
        selection that could drop a "not".
        """
        if len(point) <= width:
            return point
        cut_before = point.endswith(self.GAP)
        return self._truncate(point.removesuffix(self.GAP), width, cut_before=cut_before)

    def _cost(self, entries: tuple[str | None, ...], width: int | None = None) -> int:
        """The characters of the entries' lines (`_block`), points cut to `width`."""
        total = 0
        gap = False
        for entry in entries:
            if entry is None:
                gap = True
                continue
            total += len("\n- ") + (len(entry) if width is None else min(len(entry), width))
            total += len(f"{self.GAP} ") if gap else 0
            gap = False
        return total + (len(f"\n- {self.GAP}") if gap else 0)

    def _clip(self, text: str, limit: int) -> str:
        """The final guard: a summary over its cap (a cap too small for one label) is cut."""
        if len(text) <= limit:
            return text
        return text[: max(0, limit - 1)].rstrip() + self.GAP if limit > 0 else ""


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
