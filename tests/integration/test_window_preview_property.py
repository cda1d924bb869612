"""The preview is the next converse call's window: the same history, memory and fragment.

Conversations of every shape the API takes (tool loops, parallel calls, text
before and after tool blocks, results that answer nothing, long gaps), with
folds made along the way, through the real service and compactor on the
in-memory store. At one instant the preview is asked, then the next converse
call is made on the same clock: the turns the preview marks `window` or
`trimmed` are exactly the history that call returns.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converse_history.errors import ApiError
from converse_history.preview import WindowPreview
from converse_history.service import Incoming
from memory_core.settings import load_settings
from tests.support.simulation import (
    CALLER,
    KEY,
    SimulatedClock,
    Simulation,
    StaticRules,
)
from tests.support.tool_conversations import Recorded, tool_conversations

# A small window, so that conversations outgrow it, turns are trimmed and folds happen.
SETTINGS = load_settings(
    {
        "HISTORY_WINDOW_MAX_TOKENS": "1500",
        "HISTORY_WINDOW_MAX_MESSAGES": "8",
        "HISTORY_WINDOW_FLOOR_MESSAGES": "2",
        "HISTORY_MESSAGE_MAX_TOKENS": "300",
        "MEMORY_FOLD_MIN_TOKENS": "400",
    }
)
START = datetime.now(UTC).replace(microsecond=0) - timedelta(days=80)


def record_all(
    sim: Simulation, clock: SimulatedClock, messages: list[Recorded], fold_after: set[int]
) -> None:
    """Each message at its time, through its route; the compactor serves the requests
    queued so far after the messages in `fold_after`. A message the service refuses
    (a result that answers no pending call, say) is left out, as for a client."""
    for index, message in enumerate(messages):
        clock.now += message.gap.total_seconds()
        incoming = Incoming(f"m{index:04d}", message.role, message.content, None)
        try:
            if message.route == "converse":
                sim.service.converse(KEY.tenant_id, KEY.contact_id, incoming, CALLER)
            else:
                sim.service.record(KEY.tenant_id, KEY.contact_id, incoming, CALLER)
        except ApiError:
            pass
        if index in fold_after and sim.queue.requests:
            sim.queue.requests.clear()
            sim.compactor.compact(KEY)


def without_the_message(fragment: dict[str, Any], text: str) -> dict[str, Any]:
    """A converse answer's fragment without its current message's one text block."""
    messages = list(fragment["messages"])
    last = messages.pop()
    assert last["content"][-1] == {"text": text}
    if len(last["content"]) > 1:
        messages.append({**last, "content": last["content"][:-1]})
    return {**fragment, "messages": messages}


def history_ids(preview: dict[str, Any], standing: tuple[str, ...]) -> list[str]:
    return [
        turn_id for turn_id, view in preview["standings"].items() if view["standing"] in standing
    ]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    messages=tool_conversations(max_exchanges=6, long_gaps=True),
    cache=st.sampled_from(["off", "sliding", "stable"]),
    history_days=st.sampled_from([3, 30]),
    fold_after=st.sets(st.integers(0, 120), max_size=6),
    pause=st.integers(1, 7200),
)
def test_the_turns_in_the_preview_window_are_the_next_calls_history(
    messages: list[Recorded], cache: str, history_days: int, fold_after: set[int], pause: int
) -> None:
    clock = SimulatedClock(START.timestamp())
    tenant = {"promptCache": cache, "historyDays": history_days}
    sim = Simulation.with_settings(SETTINGS, tenant_rules=tenant, clock=clock)
    rules = StaticRules(SETTINGS.turn_retention_days, tenant)
    preview = WindowPreview(store=sim.store, rules=rules, settings=SETTINGS, clock=clock)
    record_all(sim, clock, messages, fold_after)
    clock.now += pause
    stored_before = sim.store.turns_page(KEY, None, 10_000).turns

    seen = preview.preview(KEY.tenant_id, KEY.contact_id, CALLER)
    assert sim.store.turns_page(KEY, None, 10_000).turns == stored_before  # wrote nothing
    answer = sim.service.converse(
        KEY.tenant_id,
        KEY.contact_id,
        Incoming("next", "user", [{"text": "and now?"}], None),
        CALLER,
    )

    assert seen["history"] == answer["history"]
    assert seen["memory"] == (
        None
        if answer["memory"] is None
        else {**answer["memory"], "version": seen["memory"]["version"]}
    )
    assert seen["window"] == answer["window"]
    assert seen["converse"] == without_the_message(answer["converse"], "and now?")
    in_window = history_ids(seen, ("window", "trimmed"))
    assert len(in_window) == answer["window"]["kept"]
    assert len(history_ids(seen, ("trimmed",))) == answer["window"]["trimmed"]
    # Every retained turn has exactly one standing.
    assert list(seen["standings"]) == [stored.turn.id for stored in stored_before]
    assert sum(seen["counts"].values()) == len(stored_before)
