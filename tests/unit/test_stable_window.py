"""The cache-stable window (SPEC 5, prompt caching, `promptCache: stable`), over sessions.

A session is a random conversation (`tests/support/tool_conversations.py`: every
block order, text before and after tool blocks, parallel calls, long loops)
served call by call as the service serves it: at each contact question, the
sliding window over the turns before it (newest first), then the stable
window from the edge the previous call left, the new edge carried to the next
call. Compaction runs now and then behind the newest turn (a drawn lag), each
fold a new memory version, the turns it missed late until the next fold; a
pause longer than the tenant's TTL finds the cache expired.

At every call: the stable window is a run of the sliding window's newest
turns that keeps every window rule; the edge stays exactly while its run
holds and the cache is warm, and the history then only grows (the previous
call's is its prefix, under the same memory); a move adopts the memory
offered, and the memory served holds every turn left out; a move keeps the
longest run within half the cap and half the budget, unless the floor or the
coverage asks for more; the choice is a function of its inputs and a replay
rebuilds it from the edge; the Converse fragment stays valid, its extra cache
point where the previous call cached its prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core.converse_shape import CachePoints, ConverseFragment, converse_fragment
from memory_core.rules.model import PromptCacheTtl
from memory_core.stable_window import (
    MOVE_ROOM_SHARE,
    StableChoice,
    StableEdge,
    cache_expired,
    moved_edge,
    previous_call_history,
    stable_window,
    start_of,
    suffix_from,
)
from memory_core.tokens import estimate_content_tokens
from memory_core.trim import TrimShape
from memory_core.turns import Role, Turn, TurnPosition
from memory_core.window import Window, WindowLimits, build_window
from tests.support.converse_validator import assert_valid_for_converse
from tests.support.tool_conversations import Recorded, Route, as_turns, tool_conversations
from tests.unit.conversation_builders import (
    T0,
    Clock,
    alternating,
    chars,
    default_limits,
    ids,
    text,
    tool_result,
    tool_use,
    turn,
    window_of,
)
from tests.unit.test_window_properties import limits

# Each example serves a whole session (tens of calls): fewer examples than the window's
# own properties, more under the deep profile.
SESSIONS = settings(
    max_examples=max(100, settings().max_examples // 2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PLACED = [CachePoints(placed=True, ttl="5m"), CachePoints(placed=True, ttl="1h")]


# -- sessions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    turns: list[Turn]
    """The whole conversation, oldest first: every question in it is a converse call."""
    limits: WindowLimits
    compactions: list[tuple[bool, int]]
    """For each call: whether compaction ran before it, and how many turns it lagged behind
    the newest candidate."""
    missed: frozenset[int]
    """Turns (by index) that a compaction passing them misses: late until the next fold."""
    ttl: PromptCacheTtl
    """The tenant's cache TTL: a call after a longer pause finds the cache expired."""


@dataclass(frozen=True)
class Call:
    at: int
    """The current question's index in the session: the candidates are the turns before it."""
    sliding: Window
    edge_before: StableEdge | None
    memory_version: int
    watermark: TurnPosition | None
    late: frozenset[TurnPosition]
    expired: bool
    choice: StableChoice
    served_late: frozenset[TurnPosition]
    """The late turns of the memory served (the one adopted when the edge last moved)."""

    @property
    def start(self) -> int:
        """How many of the sliding window's oldest turns the stable window leaves out."""
        return len(self.sliding.turns) - len(self.choice.window.turns)

    def choose(self, lim: WindowLimits) -> StableChoice:
        return stable_window(
            self.sliding,
            lim,
            self.edge_before,
            memory_version=self.memory_version,
            watermark=self.watermark,
            late=self.late,
            cache_expired=self.expired,
        )

    def move(self, lim: WindowLimits) -> StableChoice:
        return moved_edge(
            self.sliding,
            lim,
            memory_version=self.memory_version,
            watermark=self.watermark,
            late=self.late,
        )


@st.composite
def roomy_limits(draw: st.DrawFn) -> WindowLimits:
    """Limits under which the floor is a small part of the window: a move has room to choose."""
    max_messages = draw(st.integers(4, 30))
    return WindowLimits(
        max_tokens=draw(st.integers(1000, 8000)),
        max_messages=max_messages,
        floor_messages=draw(st.integers(1, max_messages // 3)),
        trim=TrimShape.for_budget(draw(st.integers(50, 2000))),
    )


@st.composite
def chats(draw: st.DrawFn) -> list[Recorded]:
    """A plain chat: questions, each answered by up to three replies, short texts."""

    def message(route: Route, role: Role) -> Recorded:
        body = ("q" if role == "user" else "a") * draw(st.integers(1, 600))
        return Recorded(route, role, [{"text": body}], timedelta(seconds=draw(st.integers(1, 600))))

    recorded: list[Recorded] = []
    for _ in range(draw(st.integers(1, 40))):
        recorded.append(message("converse", "user"))
        recorded.extend(message("record", "assistant") for _ in range(draw(st.integers(0, 3))))
    return recorded


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    kind = draw(st.sampled_from(["tools", "short tools", "chat", "chat"]))
    if kind == "tools":
        recorded = draw(tool_conversations(max_exchanges=12))
    elif kind == "short tools":
        # Chattier: short messages, so that runs fit and the edge has room to stay.
        recorded = draw(tool_conversations(max_exchanges=24, sizes=st.integers(1, 600)))
    else:
        recorded = draw(chats())
    turns = as_turns(recorded, T0)
    calls = sum(t.is_question for t in turns)
    lag = draw(st.sampled_from([2, 6, 12]))  # how far compaction may lag behind
    compactions = draw(
        st.lists(
            st.tuples(st.integers(0, 2).map(bool), st.integers(0, lag)),
            min_size=calls,
            max_size=calls,
        )
    )
    missed = draw(st.frozensets(st.integers(0, len(turns) - 1), max_size=3))
    # A plain chat mostly under roomy limits, where a move has a choice to make.
    lim = draw(roomy_limits() if kind == "chat" and draw(st.integers(0, 3)) else limits())
    # Pauses run up to 10 minutes: past 5 of them the 5-minute cache has expired.
    ttl: PromptCacheTtl = draw(st.sampled_from(["5m", "1h"]))
    return Session(turns, lim, compactions, missed, ttl)


def served(session: Session) -> list[Call]:
    """Every converse call of the session, as the service makes them, the edge carried."""
    turns, lim = session.turns, session.limits
    calls: list[Call] = []
    edge: StableEdge | None = None
    version, mark = 0, -1  # no fold yet: no watermark
    late: frozenset[TurnPosition] = frozenset()
    served_late: frozenset[TurnPosition] = frozenset()
    questions = [i for i, t in enumerate(turns) if t.is_question]
    for at, (compacts, lag) in zip(questions, session.compactions, strict=True):
        reach = at - 1 - lag
        if compacts and reach > mark:
            # The fold holds every turn up to `reach` but those it missed; the ones the
            # previous fold missed, it holds now.
            late = frozenset(turns[j].position for j in session.missed if mark < j <= reach)
            version, mark = version + 1, reach
        watermark = turns[mark].position if mark >= 0 else None
        sliding = build_window(reversed(turns[:at]), lim, candidate_count=at)
        expired = cache_expired(sliding, turns[at].position.recorded_at, session.ttl)
        choice = stable_window(
            sliding,
            lim,
            edge,
            memory_version=version,
            watermark=watermark,
            late=late,
            cache_expired=expired,
        )
        if choice.moved:
            served_late = late
        calls.append(
            Call(at, sliding, edge, version, watermark, late, expired, choice, served_late)
        )
        edge = choice.edge
    return calls


def held(t: Turn, watermark: TurnPosition | None, late: frozenset[TurnPosition]) -> bool:
    """Whether a memory of this watermark and these late turns holds the turn."""
    return watermark is not None and t.position <= watermark and t.position not in late


def tokens_from(window: Window, start: int) -> int:
    return sum(window.turn_tokens[start:])


def breaks_the_room(window: Window, start: int, lim: WindowLimits) -> bool:
    """Whether the run from `start` holds more than 1/MOVE_ROOM_SHARE of the budget or cap."""
    return (
        tokens_from(window, start) > lim.max_tokens // MOVE_ROOM_SHARE
        or len(window.turns) - start > lim.max_messages // MOVE_ROOM_SHARE
    )


def covered_start(call: Call) -> int:
    """The newest question of the sliding window such that the memory offered holds every
    turn before it."""
    turns = call.sliding.turns
    return max(
        s
        for s, t in enumerate(turns)
        if t.is_question and all(held(o, call.watermark, call.late) for o in turns[:s])
    )


def edge_start(call: Call) -> int | None:
    """Where the run from the edge starts in the sliding window, if it still holds there: the
    edge is one of its questions and the run keeps at least what the floor keeps."""
    edge, sliding = call.edge_before, call.sliding
    if edge is None or sliding.omission is not None:
        return None
    at = next((i for i, t in enumerate(sliding.turns) if t.position == edge.oldest), None)
    if at is None or not sliding.turns[at].is_question:
        return None
    return at if len(sliding.turns) - at >= sliding.floor_kept else None


# -- the properties, at every call of a session -----------------------------------------------


def keeps_every_rule_as_a_run_of_the_sliding_windows_newest_turns(
    session: Session, calls: list[Call]
) -> None:
    lim = session.limits
    for call in calls:
        sliding, window = call.sliding, call.choice.window
        if sliding.omission is not None or not sliding.turns:
            # An exchange longer than the cap, or no history: the sliding window itself.
            assert call.choice == StableChoice(sliding, None, moved=True)
            continue
        count, kept = len(sliding.turns), len(window.turns)
        assert window.omission is None
        assert window.turns == sliding.turns[count - kept :]
        assert window.turns[0].is_question
        assert sliding.floor_kept <= kept <= lim.max_messages
        assert len(window.messages()) == kept
        if kept > sliding.floor_kept:
            assert window.estimated_tokens <= lim.max_tokens
        # The figures are those of the run, as the sliding window's are of its own.
        assert window.turn_tokens == sliding.turn_tokens[count - kept :]
        assert window.trimmed_turns == sliding.trimmed_turns[count - kept :]
        assert window.trimmed == sum(window.trimmed_turns)
        assert window.estimated_tokens == sum(window.turn_tokens)
        assert window.estimated_tokens == sum(
            estimate_content_tokens(m["content"]) for m in window.messages()
        )
        assert window.floor_kept == sliding.floor_kept
        assert window.dropped == sliding.dropped + (count - kept) == call.at - kept
        left_out = sliding.turns[: count - kept]
        assert ids(window.passed_over) == ids([*reversed(left_out), *sliding.passed_over])
        assert call.choice.edge is not None
        assert call.choice.edge.oldest == window.turns[0].position


def stays_exactly_while_its_run_holds_and_the_cache_is_warm(
    session: Session, calls: list[Call]
) -> None:
    lim = session.limits
    for previous, call in zip([None, *calls], calls, strict=False):
        start, choice = edge_start(call), call.choice
        if start is None or call.expired:
            # No edge, or its run no longer holds: a move. A cold cache: a move costs
            # nothing more, so the edge is chosen afresh, with the newest memory.
            assert choice == call.move(lim)
            continue
        # A warm cache: the edge stays, with the memory adopted when it moved, and the
        # history is the previous call's followed by the newer turns.
        assert not choice.moved
        assert previous is not None
        assert choice.edge == call.edge_before == previous.choice.edge
        before, now = previous.choice.window, choice.window
        newer = session.turns[previous.at : call.at]
        assert ids(now.turns) == ids([*before.turns, *newer])
        assert now.messages()[: before.kept] == before.messages()
        assert previous_call_history(now) == before.kept


def the_memory_served_holds_every_turn_left_out(calls: list[Call]) -> None:
    for call in calls:
        choice = call.choice
        if choice.edge is None:
            continue
        if choice.moved:
            # A move adopts the memory offered.
            assert choice.edge.memory_version == call.memory_version
            assert choice.edge.watermark == call.watermark
            assert call.served_late == call.late
            if call.watermark is None:
                # Nothing folded: nothing may be left out.
                assert choice.window == call.sliding
        left_out = call.sliding.turns[: call.start]
        assert all(held(t, choice.edge.watermark, call.served_late) for t in left_out)


def moves_keep_the_longest_run_within_half_the_room_unless_floor_or_coverage_ask_more(
    session: Session, calls: list[Call]
) -> None:
    lim = session.limits
    for call in calls:
        if call.choice.edge is None or call.choice != call.move(lim):
            continue  # no move
        sliding, start = call.sliding, call.start
        floor_start = len(sliding.turns) - sliding.floor_kept
        cover = covered_start(call)
        # Never past the floor nor past what the memory holds.
        assert start <= floor_start
        assert start <= cover
        # The longest such run: from any older question it would hold more than half.
        for s, t in enumerate(sliding.turns[:start]):
            if t.is_question:
                assert breaks_the_room(sliding, s, lim)
        # It holds at most half the budget and half the cap (MOVE_ROOM_SHARE), unless its
        # oldest turn is the floor's or the newest question the memory's coverage allows.
        if start not in (floor_start, cover):
            assert not breaks_the_room(sliding, start, lim)


def choices_are_deterministic_and_replayed_from_the_edge(
    session: Session, calls: list[Call]
) -> None:
    lim = session.limits
    for call in calls:
        assert call.choose(lim) == call.choice
        edge = call.choice.edge
        if edge is None:
            assert call.choice.window == call.sliding
            continue
        # A replay rebuilds the sliding window from the same candidates, then the run.
        rebuilt = build_window(reversed(session.turns[: call.at]), lim, candidate_count=call.at)
        start = start_of(rebuilt, edge.oldest)
        assert start == call.start
        assert suffix_from(rebuilt, start) == call.choice.window


@given(sessions())
@SESSIONS
def test_at_every_call_the_stable_window_keeps_its_rules_and_its_edge_moves_only_as_it_must(
    session,
):
    calls = served(session)
    # 1. A run of the sliding window's newest turns, from a question, within every rule.
    keeps_every_rule_as_a_run_of_the_sliding_windows_newest_turns(session, calls)
    # 2. The edge stays exactly while its run holds and the cache is warm; the history then
    # only grows. A cold cache chooses it afresh.
    stays_exactly_while_its_run_holds_and_the_cache_is_warm(session, calls)
    # 3. A move adopts the memory offered; the memory served holds every turn left out.
    the_memory_served_holds_every_turn_left_out(calls)
    # 4. A move keeps the longest run leaving half the room, unless floor or coverage ask more.
    moves_keep_the_longest_run_within_half_the_room_unless_floor_or_coverage_ask_more(
        session, calls
    )
    # 5. The same inputs, the same choice; a replay rebuilds the window from the edge.
    choices_are_deterministic_and_replayed_from_the_edge(session, calls)


# -- the Converse fragment --------------------------------------------------------------------


def memory_of(version: int) -> str | None:
    return f"Counsel asked about clause 7 (fold {version})." if version else None


def fragment_of(
    session: Session, call: Call, cache: CachePoints
) -> tuple[ConverseFragment, str | None]:
    """The call's fragment, over the memory it serves: the edge's, else the one offered."""
    choice = call.choice
    version = choice.edge.memory_version if choice.edge is not None else call.memory_version
    memory = memory_of(version)
    built = converse_fragment(
        choice.window.messages(),
        session.turns[call.at].as_message(),
        memory,
        cache,
        previous_history=previous_call_history(choice.window),
    )
    return built, memory


def points_in_messages(shown: dict[str, Any]) -> list[tuple[int, int]]:
    return [
        (index, position)
        for index, message in enumerate(shown["messages"])
        for position, block in enumerate(message["content"])
        if "cachePoint" in block
    ]


def no_points(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": [b for b in m["content"] if "cachePoint" not in b]} for m in messages]


def prefix_to(shown: dict[str, Any], index: int, position: int) -> list[dict[str, Any]]:
    """The messages before the point at (index, position), its own up to it; no points."""
    messages = shown["messages"]
    cut = {**messages[index], "content": messages[index]["content"][:position]}
    return no_points([*messages[:index], cut])


def results_masked(messages: list[dict[str, Any]]) -> list[tuple[str, list[str], list[Any]]]:
    """Each message's role, the calls its tool results answer (in any order), its other blocks."""
    return [
        (
            m["role"],
            sorted(b["toolResult"]["toolUseId"] for b in m["content"] if "toolResult" in b),
            [b for b in m["content"] if "toolResult" not in b],
        )
        for m in messages
    ]


def _key(block: dict[str, Any]) -> str:
    return json.dumps(block, sort_keys=True)


def previous_question_at(window: Window, previous: Call | None, session: Session) -> int | None:
    """Where the previous call's message sits in this window (the previous call's history
    ended just before it), when there is a run before it."""
    if previous is None or window.omission is not None:
        return None
    wanted = session.turns[previous.at].id
    at = next((i for i, t in enumerate(window.turns) if t.id == wanted), None)
    return at or None


@given(sessions(), st.sampled_from(PLACED))
@SESSIONS
def test_every_fragment_is_valid_with_its_extra_point_where_the_previous_call_ended(session, cache):
    calls = served(session)
    # The previous call's prompt up to its point after the history (what it cached), and
    # whether the repairs made up results for it.
    cached: tuple[list[dict[str, Any]], bool] | None = None
    plain = all(len(t.content) == 1 and "text" in t.content[0] for t in session.turns)
    for previous, call in zip([None, *calls], calls, strict=False):
        window = call.choice.window
        built, memory = fragment_of(session, call, cache)
        shown = built.as_json()
        assert_valid_for_converse(shown)
        # Caching off: no point anywhere, and the points are all that caching changes.
        off, _ = fragment_of(session, call, CachePoints(placed=False))
        assert "cachePoint" not in json.dumps(off.as_json())
        assert no_points(shown["messages"]) == off.messages
        assert [b for b in shown["system"] if "cachePoint" not in b] == off.system
        in_system = [b for b in shown["system"] if "cachePoint" in b]
        assert len(in_system) == (1 if memory else 0)
        points = points_in_messages(shown)
        assert len(points) <= 2
        assert len(in_system) + len(points) <= 3
        assert previous_call_history(window) == previous_question_at(window, previous, session)
        if points:
            # The last point is the one after the history: the current message follows it.
            index, position = points[-1]
            after = shown["messages"][index]["content"][position + 1 :]
            after += [b for m in shown["messages"][index + 1 :] for b in m["content"]]
            assert index >= len(shown["messages"]) - 2
            current = session.turns[call.at].content
            assert {_key(b) for b in current if b.get("text", "").strip()} <= {
                _key(b) for b in after
            }
        if plain and not call.choice.moved:
            # A plain chat's warm call always gets its point where the previous history ended.
            assert len(points) == 2
        if len(points) == 2:
            # The other one is where the previous call's history ended.
            assert previous_call_history(window) is not None
            if not call.choice.moved:
                # The edge stayed: up to there, the prompt is the one the previous call cached
                # (the same memory and blocks), unless a result recorded since replaces one
                # the repairs made up for that call: the results then differ, nothing else.
                assert previous is not None
                assert cached is not None
                prefix, made_up = cached
                here = prefix_to(shown, *points[0])
                assert here == prefix or (
                    made_up and results_masked(here) == results_masked(prefix)
                )
                assert shown["system"] == fragment_of(session, previous, cache)[0].system
        made_up = any(r.kind == "missing_tool_result" for r in built.repairs)
        cached = (prefix_to(shown, *points[-1]), made_up) if points else None


def two_calls(
    first: list[Turn], second: list[Turn]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two converse calls (each the turns before its last one), the edge staying: the prompt
    the first cached, to its point after the history, and the second's to its previous point."""
    lim = default_limits()
    first_call = stable_window(
        window_of(first[:-1], lim), lim, None, memory_version=0, watermark=None
    )
    second_call = stable_window(
        window_of(second[:-1], lim), lim, first_call.edge, memory_version=0, watermark=None
    )
    assert not second_call.moved
    first_shown, second_shown = (
        converse_fragment(
            choice.window.messages(),
            current.as_message(),
            None,
            CachePoints(),
            previous_history=previous_call_history(choice.window),
        ).as_json()
        for choice, current in ((first_call, first[-1]), (second_call, second[-1]))
    )
    first_points, second_points = (points_in_messages(f) for f in (first_shown, second_shown))
    assert len(second_points) == 2
    return prefix_to(first_shown, *first_points[-1]), prefix_to(second_shown, *second_points[0])


def test_after_an_unanswered_call_the_previous_point_is_where_the_previous_call_cached():
    clock = Clock()
    question = turn(clock, "user", text("Is clause 7 binding?"))
    unanswered = turn(clock, "assistant", tool_use("t1", q="clause 7"))  # no result recorded
    second = turn(clock, "user", text("And clause 8?"))
    answer = turn(clock, "assistant", text("Yes, from signature."))
    third = turn(clock, "user", text("And clause 9?"))
    cached, read_at = two_calls(
        [question, unanswered, second], [question, unanswered, second, answer, third]
    )
    # The first call cached [question, call, made-up result]: the second reads there, not
    # after the call (the last block of the first call's history).
    assert read_at == cached
    assert "toolResult" in read_at[-1]["content"][0]


def test_after_a_result_recorded_after_a_question_the_previous_point_is_where_it_cached():
    clock = Clock()
    question = turn(clock, "user", text("Is clause 7 binding?"))
    call = turn(clock, "assistant", tool_use("t1", q="clause 7"))
    asked_meanwhile = turn(clock, "user", text("Also, clause 8?"))  # before the result came
    result = turn(clock, "user", tool_result("t1", "Clause 7: binding."))
    second = turn(clock, "user", text("And clause 9?"))
    answer = turn(clock, "assistant", text("Yes to all."))
    third = turn(clock, "user", text("And clause 10?"))
    first = [question, call, asked_meanwhile, result, second]
    cached, read_at = two_calls(first, [*first, answer, third])
    # The repairs put the result before "Also, clause 8?": the first call cached
    # [..., user: result, "Also, clause 8?"], and the second reads there, not after the result.
    assert read_at == cached
    assert read_at[-1]["content"][-1] == text("Also, clause 8?")


# -- long plain sessions: the edge moves seldom, each warm call reads the previous prompt ----


def test_a_long_plain_session_moves_the_edge_every_seventh_call_while_the_sliding_edge_slides():
    lim = default_limits()  # 4000 tokens, 25 messages, a floor of 10
    assert (lim.max_tokens, lim.max_messages, lim.floor_messages) == (4000, 25, 10)
    turns = alternating(Clock(), 200, tokens_each=100)
    lag = 6
    edge: StableEdge | None = None
    version, mark = 0, -1
    moves: list[int] = []
    sliding_moves = 0
    previous_oldest = None
    kept_after: dict[int, int] = {}
    for at in range(0, 200, 2):  # every question is a converse call
        if at - 1 - lag > mark:
            version, mark = version + 1, at - 1 - lag
        sliding = window_of(turns[:at], lim)
        if sliding.oldest_position != previous_oldest:
            sliding_moves += 1
            previous_oldest = sliding.oldest_position
        choice = stable_window(
            sliding,
            lim,
            edge,
            memory_version=version,
            watermark=turns[mark].position if mark >= 0 else None,
        )
        if choice.moved:
            moves.append(at)
            kept_after[at] = choice.window.kept
        edge = choice.edge
    # The sliding window holds the newest 24 turns (the cap, on a question): past the first
    # 24, its oldest turn changes at every call.
    assert sliding_moves == 1 + (198 - 24) // 2
    # A move keeps 12 turns (half the cap; 1,200 tokens, within half the budget; the floor
    # keeps 10, the watermark 6 turns back covers all but the newest 6): the run grows by
    # 2 a call and stays for 14, 16, ..., 24, then moves at 26. Before that: the first
    # call (no history, no edge) and the second (nothing folded: the whole window kept).
    assert moves == [0, 2, *range(26, 200, 14)]
    assert len(moves) == 15
    assert sliding_moves > 5 * len(moves)
    for at in moves[2:]:
        assert kept_after[at] == 12
        # Room for at least 2 more exchanges (4 messages of 100 tokens) before the next move.
        assert kept_after[at] + 4 <= lim.max_messages
        assert kept_after[at] * 100 + 400 <= lim.max_tokens
    stays = [(b - a) // 2 - 1 for a, b in pairwise(moves[1:])]
    assert stays == [11, *[6] * 12]  # calls served between two moves, the edge staying


def test_in_a_plain_chat_each_warm_call_reads_the_previous_prompt_at_its_middle_point():
    lim = default_limits()
    turns = alternating(Clock(), 80, tokens_each=100)
    edge: StableEdge | None = None
    version, mark = 0, -1
    cached: tuple[list[dict[str, Any]], list[dict[str, Any]]] | None = None
    warm = 0
    for at in range(2, 80, 2):
        if at - 7 > mark:
            version, mark = version + 1, at - 7
        choice = stable_window(
            window_of(turns[:at], lim),
            lim,
            edge,
            memory_version=version,
            watermark=turns[mark].position if mark >= 0 else None,
        )
        assert choice.edge is not None
        shown = converse_fragment(
            choice.window.messages(),
            turns[at].as_message(),
            memory_of(choice.edge.memory_version),
            CachePoints(),
            previous_history=previous_call_history(choice.window),
        ).as_json()
        assert_valid_for_converse(shown)
        points = points_in_messages(shown)
        if not choice.moved:
            warm += 1
            assert cached is not None
            assert len(points) == 2
            # The memory and the history up to the middle point: the previous call's prompt.
            assert (shown["system"], prefix_to(shown, *points[0])) == cached
        cached = (shown["system"], prefix_to(shown, *points[-1]))
        edge = choice.edge
    assert warm == 39 - 5  # every call but the moves at 2, 26, 40, 54 and 68


# -- boundaries -------------------------------------------------------------------------------


def limits_of(max_tokens: int = 4000, max_messages: int = 25, floor: int = 10) -> WindowLimits:
    # Built directly: the settings refuse a budget below twice the fold's trigger.
    return replace(
        default_limits(), max_tokens=max_tokens, max_messages=max_messages, floor_messages=floor
    )


def edge_at(t: Turn, version: int = 1) -> StableEdge:
    return StableEdge(t.position, version, t.position)


def choose(
    history: Sequence[Turn],
    lim: WindowLimits,
    edge: StableEdge | None,
    *,
    version: int = 2,
    watermark: TurnPosition | None = None,
    late: frozenset[TurnPosition] = frozenset(),
) -> tuple[Window, StableChoice]:
    sliding = window_of(history, lim)
    return sliding, stable_window(
        sliding, lim, edge, memory_version=version, watermark=watermark, late=late
    )


def test_a_run_from_the_edge_exactly_at_the_cap_stays_and_one_message_over_moves():
    lim = limits_of(max_messages=24)
    turns = alternating(Clock(), 31)  # question, answer, ... ending on a question
    edge = edge_at(turns[6])
    _, at_cap = choose(turns[:30], lim, edge)
    assert not at_cap.moved
    assert at_cap.edge == edge
    assert ids(at_cap.window.turns) == ids(turns[6:30])
    assert at_cap.window.kept == 24
    _, over = choose(turns[:31], lim, edge, watermark=turns[20].position)
    assert over.moved
    assert over.edge is not None
    assert over.edge.oldest != edge.oldest
    assert over.edge.memory_version == 2
    assert over.window.kept <= 12


def test_a_run_from_the_edge_exactly_at_the_budget_stays_and_one_token_over_moves():
    lim = limits_of(max_tokens=1000, floor=2)
    clock = Clock()
    turns = alternating(clock, 20, tokens_each=100)
    edge = edge_at(turns[10])
    _, at_budget = choose(turns, lim, edge)
    assert not at_budget.moved
    assert at_budget.window.estimated_tokens == 1000
    assert ids(at_budget.window.turns) == ids(turns[10:])
    # One letter more: 6,409 units, 101 tokens.
    heavier = [*turns[:-1], turns[-1].with_content([text(chars(100) + "x")])]
    _, over = choose(heavier, lim, edge, watermark=turns[15].position)
    assert over.moved
    assert over.edge is not None
    assert over.edge.oldest != edge.oldest
    assert over.window.estimated_tokens <= 500


def test_an_edge_whose_turn_is_no_longer_a_candidate_moves():
    lim = limits_of()
    turns = alternating(Clock(), 30)
    # Out of the history range (expired): older than every candidate.
    _, expired = choose(turns[10:], lim, edge_at(turns[4]), watermark=turns[20].position)
    assert expired.moved
    assert expired.edge is not None
    assert expired.edge.memory_version == 2
    assert expired.window.turns[0].is_question
    # Gone from within the window's span (deleted): no candidate is at its position.
    gone = [*turns[:10], *turns[11:]]
    _, deleted = choose(gone, lim, edge_at(turns[10]), watermark=turns[20].position)
    assert deleted.moved
    assert deleted.edge is not None
    assert deleted.edge.oldest != turns[10].position


def test_an_edge_on_a_turn_that_is_not_a_question_moves():
    lim = limits_of(floor=2)  # the run from each of them holds what the floor keeps
    clock = Clock()
    turns = [
        *alternating(clock, 6),
        turn(clock, "assistant", tool_use("t1", q="clause 7")),
        turn(clock, "user", tool_result("t1", "Clause 7: notice.")),
        turn(clock, "assistant", text("Notice is 30 days.")),
        *alternating(clock, 6),
    ]
    sliding = window_of(turns, lim)
    assert ids(sliding.turns) == ids(turns)
    assert sliding.floor_kept == 2
    for at in (5, 6, 7):  # an answer, a tool call, a tool result
        choice = stable_window(
            sliding, lim, edge_at(turns[at]), memory_version=3, watermark=turns[-1].position
        )
        assert choice.moved
        assert choice.edge is not None
        assert choice.edge.oldest != turns[at].position
        assert choice.window.turns[0].is_question


def test_an_edge_newer_than_the_floor_reaches_moves():
    lim = limits_of(floor=10)
    turns = alternating(Clock(), 30)
    sliding, choice = choose(turns, lim, edge_at(turns[24]), watermark=turns[-1].position)
    assert sliding.floor_kept == 10
    assert choice.moved
    assert choice.window.kept >= 10


def test_a_long_exchange_gives_no_edge_and_moves_every_call():
    lim = limits_of(max_messages=5, floor=3)
    clock = Clock()
    question = turn(clock, "user", text("Reconcile the ledger."))
    loop: list[Turn] = []
    for n in range(8):
        loop.append(turn(clock, "assistant", tool_use(f"t{n}", q=n)))
        loop.append(turn(clock, "user", tool_result(f"t{n}", "ok")))
    turns = [*alternating(clock, 4), question, *loop]
    for edge in (None, edge_at(question), edge_at(turns[0])):
        sliding, choice = choose(turns, lim, edge, watermark=turns[-1].position)
        assert sliding.omission is not None
        assert choice == StableChoice(sliding, None, moved=True)
        assert previous_call_history(choice.window) is None


def test_no_history_gives_no_edge():
    lim = limits_of()
    sliding, choice = choose([], lim, None)
    assert choice == StableChoice(sliding, None, moved=True)
    assert previous_call_history(choice.window) is None


def test_with_nothing_folded_a_move_keeps_the_whole_sliding_window():
    lim = limits_of()
    turns = alternating(Clock(), 60)
    sliding, choice = choose(turns, lim, None, version=0, watermark=None)
    assert sliding.kept == 24
    assert choice.moved
    assert choice.window == sliding
    assert choice.edge == StableEdge(turns[36].position, 0, None)


def test_a_move_stops_at_the_watermark_and_before_a_late_turn():
    lim = limits_of()
    turns = alternating(Clock(), 60)  # sliding: turns[36:]
    # Everything folded: half the cap, 12 turns.
    _, roomy = choose(turns, lim, None, watermark=turns[-1].position)
    assert ids(roomy.window.turns) == ids(turns[48:])
    # The memory holds up to turns[40]: the edge may not pass turns[41].
    _, short = choose(turns, lim, None, watermark=turns[40].position)
    assert ids(short.window.turns) == ids(turns[40:])
    # ... nor a late turn below the watermark: the question before it is the edge.
    late = frozenset({turns[39].position})
    _, held = choose(turns, lim, None, watermark=turns[-1].position, late=late)
    assert ids(held.window.turns) == ids(turns[38:])
    assert held.edge is not None
    assert held.edge.watermark == turns[-1].position


def test_a_move_keeps_a_run_of_exactly_half_the_budget_and_not_one_token_more():
    lim = limits_of(max_tokens=1000, floor=2)
    turns = alternating(Clock(), 8, tokens_each=125)
    watermark = turns[-1].position
    sliding, half = choose(turns, lim, None, watermark=watermark)
    assert sliding.kept == 8
    assert ids(half.window.turns) == ids(turns[4:])
    assert half.window.estimated_tokens == 500
    # One letter more: 8,008 units, 126 tokens.
    heavier = [*turns[:-1], turns[-1].with_content([text(chars(125) + "x")])]
    _, over = choose(heavier, lim, None, watermark=watermark)
    assert ids(over.window.turns) == ids(turns[6:])


def test_a_move_where_no_run_has_room_goes_to_the_newest_exchange_the_floor_keeps():
    lim = limits_of(max_tokens=1000, floor=2)
    clock = Clock()
    turns = [
        *alternating(clock, 8, tokens_each=50),
        turn(clock, "user", text(chars(100))),
        turn(clock, "assistant", text(chars(500))),  # the newest exchange: 600 tokens
    ]
    sliding, choice = choose(turns, lim, None, watermark=turns[-1].position)
    assert (sliding.kept, sliding.floor_kept) == (10, 2)
    assert ids(choice.window.turns) == ids(turns[8:])
    assert choice.window.estimated_tokens == 600  # over half: the floor asks for it


def test_a_cold_cache_chooses_the_edge_afresh_even_where_that_shows_more():
    # The edge stands newer than a move would put it (it moved under a smaller cap, or
    # a late turn sits before it): with the cache cold the move costs nothing more.
    lim = limits_of(floor=2)
    turns = alternating(Clock(), 30)
    edge = edge_at(turns[24])
    watermark = turns[-1].position
    sliding, warm = choose(turns, lim, edge, watermark=watermark)
    assert warm == StableChoice(suffix_from(sliding, 18), edge, moved=False)
    cold = stable_window(
        sliding, lim, edge, memory_version=2, watermark=watermark, cache_expired=True
    )
    moved = moved_edge(sliding, lim, memory_version=2, watermark=watermark)
    assert moved.window.kept == 12
    assert cold == moved
    assert cold.edge == StableEdge(turns[18].position, 2, watermark)


def test_the_previous_call_history_is_the_run_before_the_newest_question():
    turns = alternating(Clock(), 10)
    window = window_of(turns)
    assert previous_call_history(window) == 8
    # The newest question opens the window: the previous history was not in it.
    assert previous_call_history(window_of(turns[8:])) is None
