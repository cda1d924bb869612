"""Recall's index: segments of term counts rank as the turns themselves do, however the
turns were split, merged, cut into parts or left unindexed; the merge tree keeps every
compaction in exactly one live segment."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.recall import MAX_LIMIT, rank
from memory_core.recall_index import (
    FAN_IN,
    TOP_LEVEL,
    Segment,
    SegmentName,
    live,
    merge_due,
    merged,
    merged_name,
    pack,
    search,
    segment_of,
    split,
    unpack,
)
from memory_core.turns import Turn, TurnPosition
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn
from tests.unit.test_recall_ranking import bodies_strategy, conversation, query_strategy


def everything(_: TurnPosition) -> bool:
    return True


def ranked(query: str, turns: list[Turn], limit: int) -> list[tuple[TurnPosition, float]]:
    return [(s.turn.position, s.score) for s in rank(query, turns, limit)]


def searched(
    query: str, segments: list[Segment], unindexed: list[Turn], limit: int, keep=everything
) -> list[tuple[TurnPosition, float]]:
    return [(f.position, f.score) for f in search(query, segments, unindexed, keep, limit)]


@st.composite
def split_conversations(draw):
    """A conversation, cut into runs (compactions' segments) and an unindexed tail."""
    turns = conversation(*draw(bodies_strategy))
    cuts = sorted(draw(st.lists(st.integers(0, len(turns)), max_size=5)))
    bounds = [0, *cuts, len(turns)]
    runs = [turns[a:b] for a, b in pairwise(bounds)]
    return turns, [segment_of(run) for run in runs[:-1]], runs[-1]


@settings(max_examples=300)
@given(split_conversations(), query_strategy, st.integers(1, MAX_LIMIT))
def test_segments_and_an_unindexed_tail_rank_as_the_turns_do(case, query, limit):
    turns, segments, tail = case
    assert searched(query, segments, tail, limit) == ranked(query, turns, limit)


@settings(max_examples=200)
@given(split_conversations(), query_strategy, st.integers(1, MAX_LIMIT))
def test_merged_segments_rank_as_the_segments_they_merged(case, query, limit):
    _, segments, tail = case
    whole = merged(segments, everything)
    assert searched(query, [whole], tail, limit) == searched(query, segments, tail, limit)
    assert whole.positions == tuple(sorted(whole.positions))


@settings(max_examples=200)
@given(split_conversations(), query_strategy, st.integers(1, 4))
def test_a_segment_cut_into_parts_ranks_as_the_whole(case, query, parts):
    turns, _, _ = case
    whole = segment_of(turns)
    pieces = split(whole, parts)
    assert sum(len(p.positions) for p in pieces) == len(turns)
    assert len(pieces) <= parts
    assert searched(query, pieces, [], MAX_LIMIT) == ranked(query, turns, MAX_LIMIT)


@settings(max_examples=200)
@given(split_conversations(), query_strategy, st.integers(0, 25), st.booleans())
def test_a_history_range_cut_anywhere_ranks_the_turns_from_the_cut_on(case, query, cut, overlap):
    turns, segments, tail = case
    if overlap and segments:  # a turn both in a segment and read whole: counted once
        tail = [*turns[: len(segments[0].positions)], *tail]
    oldest = turns[min(cut, len(turns) - 1)].position

    found = searched(query, segments, tail, MAX_LIMIT, keep=lambda p: p >= oldest)

    assert found == ranked(query, [t for t in turns if t.position >= oldest], MAX_LIMIT)


@given(st.dictionaries(st.integers(0, 10_000), st.integers(1, 50)))
def test_postings_pack_and_unpack_to_the_same_counts(counts):
    assert unpack(pack(counts)) == counts


def test_a_count_of_one_is_packed_without_it():
    assert pack({7: 2, 3: 1}) == "3 7:2"


def test_a_turn_the_search_does_not_keep_is_neither_found_nor_counted():
    turns = conversation("the lease of Rue Lepic", "the lease ends in May", "a lease")
    dropped = turns[0].position

    found = searched("lease", [segment_of(turns)], [], 5, keep=lambda p: p != dropped)

    assert found == ranked("lease", turns[1:], 5)


def test_a_merge_leaves_out_what_it_is_told_to_and_keeps_one_copy_of_a_turn():
    turns = conversation("alpha one", "alpha two", "alpha three")
    twice = [segment_of(turns[:2]), segment_of(turns[1:])]

    kept = merged(twice, lambda p: p != turns[0].position)

    assert kept.positions == (turns[1].position, turns[2].position)
    assert searched("alpha", [kept], [], 5) == ranked("alpha", turns[1:], 5)


def test_a_turn_both_indexed_and_unindexed_counts_once():
    turns = conversation("the clause", "another clause", "nothing")
    assert searched("clause", [segment_of(turns)], turns[:2], 5) == ranked("clause", turns, 5)


def test_tool_blocks_are_indexed_as_the_ranking_reads_them():
    clock = Clock()
    turns = [
        turn(clock, "assistant", tool_use("t1", "lookup_invoice", number="INV-2031")),
        turn(clock, "user", tool_result("t1", "INV-2031 is paid in full")),
        turn(clock, "assistant", text("noted")),
    ]
    assert searched("INV-2031 paid", [segment_of(turns)], [], 5) == ranked(
        "INV-2031 paid", turns, 5
    )


def test_a_query_without_terms_or_a_conversation_without_turns_finds_nothing():
    turns = conversation("anything")
    assert searched("...", [segment_of(turns)], [], 5) == []
    assert searched("anything", [], [], 5) == []
    assert searched("anything", [segment_of([])], [], 5) == []


# --- The merge tree ---------------------------------------------------------------------


def level0(version: int) -> SegmentName:
    return SegmentName(0, version, version)


def fold(names: list[SegmentName], version: int) -> list[SegmentName]:
    """What the compactor does after a fold: its segment, then the merges due."""
    names = [*names, level0(version)]
    while (due := merge_due(names)) is not None:
        names.append(merged_name(due))
    return names


@settings(max_examples=50)
@given(st.integers(1, 700))
def test_every_compaction_is_in_exactly_one_live_segment_and_few_are_read(folds):
    names: list[SegmentName] = []
    for version in range(1, folds + 1):
        names = fold(names, version)
    standing = live(names)
    covered = sorted(v for name in standing for v in range(name.first, name.last + 1))
    assert covered == list(range(1, folds + 1))
    below_top = [name for name in standing if name.level < TOP_LEVEL]
    assert len(below_top) <= TOP_LEVEL * (FAN_IN - 1)


def test_a_level_merges_at_fan_in_segments_not_one_before():
    names = [level0(v) for v in range(1, FAN_IN)]
    assert merge_due(names) is None
    names.append(level0(FAN_IN))
    assert merge_due(names) == names
    assert merged_name(names) == SegmentName(1, 1, FAN_IN)


def test_merged_segments_are_superseded_and_later_ones_stay_live():
    names = [level0(v) for v in range(1, FAN_IN + 2)]
    names.append(SegmentName(1, 1, FAN_IN))
    assert live(names) == [SegmentName(1, 1, FAN_IN), level0(FAN_IN + 1)]


def test_the_top_level_is_never_merged():
    top = [SegmentName(TOP_LEVEL, v, v) for v in range(1, FAN_IN + 2)]
    assert merge_due(top) is None
    assert live(top) == top


def test_the_lowest_level_due_merges_first():
    ones = [SegmentName(1, 8 * v + 1, 8 * v + 8) for v in range(FAN_IN)]
    zeros = [level0(v) for v in range(100, 100 + FAN_IN)]
    assert merge_due([*ones, *zeros]) == zeros


@pytest.mark.parametrize("count", [1, 2, 5])
def test_a_segment_of_turns_keeps_them_oldest_first_with_their_lengths(count):
    turns = conversation(*(f"word{n} " * (n + 1) for n in range(count)))
    shuffled = list(reversed(turns))
    segment = segment_of(shuffled)
    assert segment.positions == tuple(t.position for t in turns)
    assert segment.lengths == tuple(range(1, count + 1))


def test_turns_sent_at_one_instant_are_told_apart_by_arrival_and_id():
    clock = Clock()
    first = turn(clock, "user", text("same words"))
    second = Turn("z", "user", first.content, first.sent_at, first.sent_at + timedelta(seconds=1))
    assert searched("same", [segment_of([first, second])], [], 5) == ranked(
        "same", [first, second], 5
    )
