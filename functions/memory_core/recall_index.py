"""Recall's index: each folded turn's term counts, kept in segments the compactor writes.

Reading 5,000 turns to rank them costs seconds and megabytes; their term
counts, inverted (for each term, the turns it occurs in and how often), are a
fraction of that, and a recall decodes only its query's terms. Each
compaction writes one segment of the turns it folded (level 0). Once `FAN_IN`
segments of a level stand, the compactor merges them into one of the next
level, as a log-structured merge tree does, so a conversation of any length
is read in a few dozen items at most, and each turn's counts are rewritten
once a level. Merged segments are left where they are, superseded: a reader
takes, at each level, only the segments newer than the newest of the levels
above (`live`), so nothing is deleted to merge (a delete bills the item's
size) and DynamoDB's TTL removes them with their turns.

A segment is named by its level and the compaction versions it covers
(`SegmentName`); a merge covers the versions of the segments it merged. The
unfolded turns and the late ones, in no segment yet, are ranked from their
words beside the segments (`search`), so every retained turn is found.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING

from memory_core.turns import Turn, TurnPosition

if TYPE_CHECKING:
    from memory_core.recall import TermCounts

FAN_IN = 8
"""Segments of one level merged into one of the next."""
TOP_LEVEL = 3
"""Merged no further: a level-3 segment holds 512 compactions (about 6,000 chat turns), and
its parts stay under DynamoDB's item limit. Segments of the top level accumulate."""


@dataclass(frozen=True, slots=True, order=True)
class SegmentName:
    """Which compactions a segment holds (`first` to `last` version), at which level; a
    segment too large for one item is written in parts of the same name."""

    level: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Segment:
    """Term counts of a run of turns, inverted.

    `postings[term]` lists the turns the term occurs in, packed as text (`pack`):
    a recall unpacks only its query's terms.
    """

    positions: tuple[TurnPosition, ...]
    """Oldest first; a turn's index in a posting is its place here."""
    lengths: tuple[int, ...]
    """Each turn's words and pairs: BM25's document length."""
    postings: Mapping[str, str] = field(default_factory=dict)

    def counts_of(self, term: str) -> dict[int, int]:
        packed = self.postings.get(term)
        return unpack(packed) if packed else {}


def pack(counts: Mapping[int, int]) -> str:
    """`{3: 1, 7: 2}` as `"3 7:2"`: turn indices in order, a count only when above one."""
    return " ".join(
        str(index) if count == 1 else f"{index}:{count}" for index, count in sorted(counts.items())
    )


def unpack(packed: str) -> dict[int, int]:
    counts: dict[int, int] = {}
    for entry in packed.split():
        index, _, count = entry.partition(":")
        counts[int(index)] = int(count) if count else 1
    return counts


def segment_of(turns: Iterable[Turn]) -> Segment:
    """The segment of these turns (a compaction's, folded), oldest first."""
    # Imported here, as in `search`: the converse Lambda loads this module with its store,
    # and its cold start need not load recall's terms (docs/decisions.md, "Cold start").
    from memory_core.recall import term_counts  # noqa: PLC0415

    ordered = sorted(turns, key=lambda turn: turn.position)
    inverted: dict[str, dict[int, int]] = {}
    lengths: list[int] = []
    for index, turn in enumerate(ordered):
        counted = term_counts(turn)
        lengths.append(counted.length)
        for term, count in counted.counts.items():
            inverted.setdefault(term, {})[index] = count
    return Segment(
        tuple(turn.position for turn in ordered),
        tuple(lengths),
        {term: pack(counts) for term, counts in inverted.items()},
    )


def merged(segments: Sequence[Segment], keep: Callable[[TurnPosition], bool]) -> Segment:
    """One segment of these, oldest first, each turn once (the later segment's counts when
    two hold it), without the turns `keep` refuses (those an erase fenced off)."""
    newest: dict[TurnPosition, tuple[int, int]] = {}
    for number, segment in enumerate(segments):
        for index, position in enumerate(segment.positions):
            if keep(position):
                newest[position] = (number, index)
    positions = sorted(newest)
    place = {newest[position]: at for at, position in enumerate(positions)}
    lengths = [segments[newest[p][0]].lengths[newest[p][1]] for p in positions]
    inverted: dict[str, dict[int, int]] = {}
    for number, segment in enumerate(segments):
        for term, packed in segment.postings.items():
            for index, count in unpack(packed).items():
                at = place.get((number, index))
                if at is not None:
                    inverted.setdefault(term, {})[at] = count
    return Segment(
        tuple(positions), tuple(lengths), {term: pack(c) for term, c in inverted.items()}
    )


def split(segment: Segment, parts: int) -> list[Segment]:
    """The segment as `parts` runs of its turns (for an item limit), each with its postings."""
    count = len(segment.positions)
    size = -(-count // parts)
    runs = [range(start, min(start + size, count)) for start in range(0, count, size)]
    pieces: list[dict[str, dict[int, int]]] = [{} for _ in runs]
    for term, packed in segment.postings.items():
        for index, count in unpack(packed).items():
            pieces[index // size].setdefault(term, {})[index % size] = count
    return [
        Segment(
            tuple(segment.positions[i] for i in run),
            tuple(segment.lengths[i] for i in run),
            {term: pack(counts) for term, counts in piece.items()},
        )
        for run, piece in zip(runs, pieces, strict=True)
    ]


def live(names: Iterable[SegmentName]) -> list[SegmentName]:
    """The names a reader takes: at each level, those newer than every segment above it.

    A merge takes the oldest segments of its level, so a segment whose first
    version is at or below the last of a higher level's was merged there.
    """
    by_level = sorted(set(names), key=lambda name: (-name.level, name.first))
    above = 0
    found: list[SegmentName] = []
    for _, level in groupby(by_level, key=lambda name: name.level):
        standing = [name for name in level if name.first > above]
        found += standing
        above = max([above, *(name.last for name in standing)])
    return found


def merge_due(names: Iterable[SegmentName]) -> list[SegmentName] | None:
    """The oldest `FAN_IN` live segments of the lowest level that has that many, below the
    top level; None when no level has."""
    standing = live(names)
    for level in range(TOP_LEVEL):
        at_level = sorted(name for name in standing if name.level == level)
        if len(at_level) >= FAN_IN:
            return at_level[:FAN_IN]
    return None


def merged_name(names: Sequence[SegmentName]) -> SegmentName:
    return SegmentName(names[0].level + 1, min(n.first for n in names), max(n.last for n in names))


@dataclass(frozen=True, slots=True)
class Found:
    position: TurnPosition
    score: float


def search(
    query: str,
    segments: Sequence[Segment],
    unindexed: Sequence[Turn],
    keep: Callable[[TurnPosition], bool],
    limit: int,
) -> list[Found]:
    """The best `limit` turns for the query, by BM25 over every turn `keep` takes: those of
    the segments and the unindexed ones (read whole), each counted once.

    `keep` refuses turns older than some position and takes the rest (the history
    range and an erase's fence both cut by `sentAt`): in a segment, whose turns are
    in order, the kept ones are found by bisection and taken as a run.
    """
    from memory_core.recall import best, term_counts, terms  # noqa: PLC0415 (see segment_of)

    wanted = sorted(set(terms(query)))
    if not wanted:
        return []
    documents = _Documents(wanted, keep)
    for turn in unindexed:
        documents.add_turn(turn.position, term_counts(turn))
    for segment in reversed(segments):  # a turn in two segments counts as the newer wrote it
        documents.add_segment(segment)
    if not documents.positions:
        return []
    ranked = best(documents.positions, documents.lengths, documents.frequencies, limit)
    return [Found(documents.positions[i], score) for i, score in ranked]


class _Documents:
    """What BM25 reads of the searched turns: each turn's position, its length and its
    count of each wanted term (`frequencies[term][index]`), each turn once."""

    def __init__(self, wanted: Sequence[str], keep: Callable[[TurnPosition], bool]) -> None:
        self.wanted = wanted
        self.keep = keep
        self.positions: list[TurnPosition] = []
        self.lengths: list[int] = []
        self.frequencies: dict[str, dict[int, int]] = {term: {} for term in wanted}
        self.seen: set[TurnPosition] = set()

    def add_turn(self, position: TurnPosition, counted: TermCounts) -> None:
        if position in self.seen or not self.keep(position):
            return
        self.seen.add(position)
        at = len(self.positions)
        self.positions.append(position)
        self.lengths.append(counted.length)
        for term in self.wanted:
            count = counted.counts.get(term)
            if count:
                self.frequencies[term][at] = count

    def add_segment(self, segment: Segment) -> None:
        start = _first_kept(segment.positions, self.keep)
        kept = segment.positions[start:]
        if self.seen.isdisjoint(kept):  # the usual case, each turn in one segment: a run
            offset = len(self.positions) - start
            self.positions.extend(kept)
            self.lengths.extend(segment.lengths[start:])
            self.seen.update(kept)
            place: Callable[[int], int | None] = _shifted(offset, start)
        else:
            places: dict[int, int] = {}
            for index in range(start, len(segment.positions)):
                position = segment.positions[index]
                if position not in self.seen:
                    self.seen.add(position)
                    places[index] = len(self.positions)
                    self.positions.append(position)
                    self.lengths.append(segment.lengths[index])
            place = places.get
        for term in self.wanted:
            found = self.frequencies[term]
            for index, count in segment.counts_of(term).items():
                at = place(index)
                if at is not None:
                    found[at] = count


def _shifted(offset: int, start: int) -> Callable[[int], int | None]:
    """A run's places: a segment's turn `index` (from `start` on) at `offset + index`."""

    def place(index: int) -> int | None:
        return offset + index if index >= start else None

    return place


def _first_kept(positions: Sequence[TurnPosition], keep: Callable[[TurnPosition], bool]) -> int:
    """Where the kept turns of a segment start: `keep` refuses the older turns only."""
    return bisect_left(range(len(positions)), True, key=lambda index: keep(positions[index]))
