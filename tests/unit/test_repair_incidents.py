"""A repair is one incident: the window it first appears in reports it, the later ones do not."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from memory_core.converse_shape import converse_messages
from memory_core.repair_incidents import first_appearances
from memory_core.repairs import Repair
from memory_core.turns import Turn
from tests.unit.conversation_builders import T0, text, tool_result, tool_use

MICROSECOND = timedelta(microseconds=1)


def at(turn_id: str, role: str, minute: int, *content: dict[str, object]) -> Turn:
    """A turn sent and recorded `minute` minutes after T0."""
    moment = T0 + timedelta(minutes=minute)
    return Turn(turn_id, role, list(content), moment, moment)  # type: ignore[arg-type]


def repairs_of(history: list[Turn], current: Turn) -> list[Repair]:
    _, repairs = converse_messages([t.as_message() for t in history], current.as_message())
    return repairs


def new_in(history: list[Turn], current: Turn, last_window_at: datetime | None) -> list[Repair]:
    return first_appearances(repairs_of(history, current), history, last_window_at)


PENDING = [at("q1", "user", 0, text("Q")), at("a1", "assistant", 1, tool_use("c1"))]


def test_without_a_window_before_every_repair_is_new() -> None:
    current = at("q2", "user", 2, text("still there?"))
    assert new_in(PENDING, current, None) == repairs_of(PENDING, current)
    assert len(repairs_of(PENDING, current)) == 1


def test_no_repair_no_incident() -> None:
    history = [at("q1", "user", 0, text("Q")), at("a1", "assistant", 1, text("A"))]
    assert new_in(history, at("q2", "user", 2, text("Q2")), T0 + timedelta(minutes=1)) == []


def test_the_first_window_after_the_unanswered_call_reports_it() -> None:
    """The window before was served at the question, before the call was recorded."""
    current = at("q2", "user", 2, text("still there?"))
    (repair,) = new_in(PENDING, current, T0)
    assert (repair.kind, repair.tool_use_id) == ("missing_tool_result", "c1")


def test_a_later_window_does_not_report_it_again() -> None:
    history = [*PENDING, at("q2", "user", 2, text("still there?"))]
    current = at("q3", "user", 3, text("hello?"))
    assert len(repairs_of(history, current)) == 1
    assert new_in(history, current, T0 + timedelta(minutes=2)) == []


def test_a_turn_recorded_exactly_when_the_last_window_was_served_was_shown() -> None:
    history = [*PENDING, at("q2", "user", 2, text("still there?"))]
    current = at("q3", "user", 3, text("hello?"))
    served = history[-1].position.recorded_at
    assert new_in(history, current, served) == []
    # One microsecond earlier, the turn that left the call unanswered was not shown yet.
    assert len(new_in(history, current, served - MICROSECOND)) == 1


def test_only_the_new_of_two_repairs_is_reported() -> None:
    history = [
        *PENDING,
        at("q2", "user", 2, text("still there?")),
        at("a2", "assistant", 3, tool_use("c2")),
    ]
    current = at("q3", "user", 4, text("hello?"))
    (repair,) = new_in(history, current, T0 + timedelta(minutes=2))
    assert repair.tool_use_id == "c2"


def test_repairs_of_one_kind_without_a_tool_are_counted_one_by_one() -> None:
    """Two messages whose results came after text: each move is an incident of its own."""
    history = [
        at("q1", "user", 0, text("Q")),
        at("a1", "assistant", 1, tool_use("c1")),
        at("q2", "user", 2, text("and")),
        at("r1", "user", 3, tool_result("c1", "one")),
        at("a2", "assistant", 4, tool_use("c2")),
        at("q3", "user", 5, text("also")),
    ]
    current = at("r2", "user", 6, tool_result("c2", "two"))
    kinds = [r.kind for r in repairs_of(history, current)]
    assert kinds == ["tool_results_moved_first", "tool_results_moved_first"]
    (repair,) = new_in(history, current, T0 + timedelta(minutes=5))
    assert repair.kind == "tool_results_moved_first"
    assert len(new_in(history, current, T0 + timedelta(minutes=2))) == 2


def test_a_result_recorded_after_the_last_window_into_an_old_exchange_is_new() -> None:
    late = Turn(
        "ghost",
        "user",
        [tool_result("nobody", "?")],
        T0 + timedelta(minutes=1, seconds=30),
        T0 + timedelta(minutes=10),
    )
    history = [
        at("q1", "user", 0, text("Q")),
        at("a1", "assistant", 1, text("A")),
        late,
        at("q2", "user", 2, text("Q2")),
    ]
    current = at("q3", "user", 11, text("Q3"))
    (repair,) = new_in(history, current, T0 + timedelta(minutes=9))
    assert (repair.kind, repair.tool_use_id) == ("orphan_tool_result", "nobody")
    assert new_in(history, current, T0 + timedelta(minutes=10)) == []


STEPS = st.lists(st.sampled_from(["question", "call", "result", "reply"]), max_size=12)


@given(steps=STEPS)
def test_over_a_conversation_each_repair_is_reported_once(steps: list[str]) -> None:
    """Window after window, as the service serves them: every repair a fragment makes has
    been reported by then, and none more often than any one fragment makes it."""
    history: list[Turn] = []
    last_window_at: datetime | None = None
    reported: Counter[tuple[str, str | None]] = Counter()
    most: Counter[tuple[str, str | None]] = Counter()
    calls = 0
    for minute, step in enumerate(steps):
        if step == "question":
            current = at(f"q{minute}", "user", minute, text("Q"))
            repairs = repairs_of(history, current)
            new = first_appearances(repairs, history, last_window_at)
            reported.update((r.kind, r.tool_use_id) for r in new)
            shown: Counter[tuple[str, str | None]] = Counter(
                (r.kind, r.tool_use_id) for r in repairs
            )
            most |= shown
            assert not shown - reported  # nothing shown goes unreported
            last_window_at = current.position.recorded_at
            history.append(current)
        elif step == "call":
            calls += 1
            history.append(at(f"a{minute}", "assistant", minute, tool_use(f"c{calls}")))
        elif step == "result":
            history.append(at(f"r{minute}", "user", minute, tool_result(f"c{calls}", "r")))
        else:
            history.append(at(f"a{minute}", "assistant", minute, text("A")))
    assert reported == most
