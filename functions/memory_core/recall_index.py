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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from memory_core.turns import Turn, TurnPosition

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
    the segments and the unindexed ones (read whole), each counted once."""
    from memory_core.recall import best, term_counts, terms  # noqa: PLC0415 (see segment_of)

    wanted = sorted(set(terms(query)))
    if not wanted:
        return []
    positions: list[TurnPosition] = []
    lengths: list[int] = []
    frequencies: dict[str, dict[int, int]] = {term: {} for term in wanted}
    seen: set[TurnPosition] = set()
    for turn in unindexed:
        if turn.position in seen or not keep(turn.position):
            continue
        seen.add(turn.position)
        counted = term_counts(turn)
        at = len(positions)
        positions.append(turn.position)
        lengths.append(counted.length)
        for term in wanted:
            count = counted.counts.get(term)
            if count:
                frequencies[term][at] = count
    for segment in reversed(segments):  # a turn in two segments counts as the newer wrote it
        places: dict[int, int] = {}
        for index, position in enumerate(segment.positions):
            if position not in seen and keep(position):
                seen.add(position)
                places[index] = len(positions)
                positions.append(position)
                lengths.append(segment.lengths[index])
        for term in wanted:
            for index, count in segment.counts_of(term).items():
                place = places.get(index)
                if place is not None:
                    frequencies[term][place] = count
    if not positions:
        return []
    return [Found(positions[i], score) for i, score in best(positions, lengths, frequencies, limit)]
