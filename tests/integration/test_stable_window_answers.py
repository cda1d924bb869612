"""`promptCache: stable` through the handler and the real compactor (SPEC 5, prompt caching).

The same conversation is held with a `stable` tenant and a `sliding` one,
folded as it goes. The stable history keeps its oldest edge between calls
(each history is the previous one and the newest turns) and moves in chunks;
its memory changes only when the edge moves; a retry is answered the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Api, minutes_ago, request_record
from tests.integration.test_compactor import run
from tests.support.converse_validator import assert_valid_for_converse

RULES: dict[str, dict[str, dict[str, Any]]] = {
    "tenants": {
        "steady": {"promptCache": "stable", "maxTurnsPerConversation": 500},
        "plain": {"maxTurnsPerConversation": 500},
    }
}
START = minutes_ago(600)
EXCHANGES = 36
CAP = 25


@pytest.fixture
def api(make_api: Callable[..., Api], rules_file: Path) -> Api:
    rules_file.write_text(json.dumps(RULES))
    return make_api()


def question(n: int) -> str:
    return f"question {n}: " + "q" * 400


def session(api: Api, tenant: str, exchanges: int = EXCHANGES) -> list[dict[str, Any]]:
    """Exchanges of some 100-token messages, a compaction run after each; every answer."""
    compactor = api.compactor()
    answers = []
    for n in range(exchanges):
        at = START + timedelta(minutes=2 * n)
        status, body = api.converse(question(n), tenant=tenant, sent_at=at, message_id=f"q{n}")
        assert status == 200
        state = api.state(tenant) or {}
        body["foldVersion"] = int(state.get("foldVersion", {"N": "0"})["N"])
        body["edge"] = state.get("windowEdge", {}).get("S")
        answers.append(body)
        api.reply(f"answer {n}: " + "a" * 400, tenant=tenant, sent_at=at + timedelta(seconds=30))
        assert run(compactor, request_record(tenant, "c1", f"fold-{n}")) == {
            "batchItemFailures": []
        }
    return answers


def first_text(body: dict[str, Any]) -> str:
    return str(body["history"][0]["content"][0]["text"]) if body["history"] else ""


def slides(answers: list[dict[str, Any]]) -> list[int]:
    """The calls whose history does not extend the previous call's."""
    return [
        n
        for n in range(1, len(answers))
        if answers[n]["history"][: len(answers[n - 1]["history"])] != answers[n - 1]["history"]
    ]


def moves(answers: list[dict[str, Any]]) -> list[int]:
    """The calls that moved the stable edge kept in the state."""
    return [n for n in range(1, len(answers)) if answers[n]["edge"] != answers[n - 1]["edge"]]


def test_the_stable_history_extends_the_previous_one_and_moves_in_chunks(api):
    steady = session(api, "steady")
    plain = session(api, "plain")
    for body in steady:
        assert_valid_for_converse(body["converse"])
        assert body["window"]["kept"] <= CAP
        assert body["window"]["estimatedTokens"] <= 4000
        assert first_text(body).startswith("question") or not body["history"]
    # The sliding edge moves with almost every call once the cap binds.
    assert len(slides(plain)) >= EXCHANGES - 16
    # The stable one stays put between moves: each history extends the previous one.
    stable_moves = moves(steady)
    assert set(slides(steady)) <= set(stable_moves)
    # It moves far less, and each move leaves room for several exchanges.
    late_moves = [n for n in stable_moves if steady[n - 1]["edge"] is not None]
    assert 1 <= len(late_moves) <= len(slides(plain)) // 3
    for n in late_moves:
        assert steady[n]["window"]["kept"] <= CAP // 2 + 1
        # A move is forced: the run from the old edge would have broken the cap.
        assert len(steady[n - 1]["history"]) + 2 > CAP
    # Never fewer messages than the floor keeps, nor than the sliding window's floor.
    assert all(body["window"]["kept"] >= 10 for body in steady[6:])


def test_between_moves_the_memory_stays_the_one_adopted_with_the_move(api):
    steady = session(api, "steady")
    moved = set(moves(steady))
    folded_mid_stretch = 0
    for n in range(1, len(steady)):
        if n in moved:
            # The move adopts the memory current at the call.
            assert steady[n]["memory"] is not None
            continue
        assert steady[n]["memory"] == steady[n - 1]["memory"]
        if steady[n]["foldVersion"] > steady[n - 1]["foldVersion"]:
            folded_mid_stretch += 1
    assert folded_mid_stretch >= 2  # the case under test happened: a newer fold waited


def test_the_stable_answer_carries_a_point_where_the_previous_history_ended(api):
    steady = session(api, "steady", exchanges=8)
    previous, body = steady[-2], steady[-1]
    messages = body["converse"]["messages"]
    ends = [
        (index, block_index)
        for index, message in enumerate(messages)
        for block_index, block in enumerate(message["content"])
        if "cachePoint" in block
    ]
    assert len(ends) == 2
    # The first point closes the previous call's history; the second this one's.
    assert messages[ends[0][0]]["content"][: ends[0][1]] == previous["history"][-1]["content"]
    assert [m["content"] for m in messages[: ends[0][0] + 1]][:-1] == [
        m["content"] for m in previous["history"][:-1]
    ]
    assert ends[1][0] == len(messages) - 2
    assert len(body["converse"]["system"]) == 2  # the memory and its point


def test_a_retry_of_a_stable_answer_is_answered_the_same_after_moves_and_folds(api):
    steady = session(api, "steady", exchanges=14)
    first = steady[6]
    session_after(api, 14, 30)
    assert steady[6]["edge"] != api.state("steady")["windowEdge"]["S"]  # the edge moved since
    status, again = api.converse(
        question(6), tenant="steady", sent_at=START + timedelta(minutes=12), message_id="q6"
    )
    assert status == 200
    first.pop("foldVersion")
    first.pop("edge")
    assert again == first


def session_after(api: Api, start: int, stop: int) -> list[dict[str, Any]]:
    compactor = api.compactor()
    answers = []
    for n in range(start, stop):
        at = START + timedelta(minutes=2 * n)
        answers.append(
            api.converse(question(n), tenant="steady", sent_at=at, message_id=f"q{n}")[1]
        )
        api.reply(f"answer {n}: " + "a" * 400, tenant="steady", sent_at=at + timedelta(seconds=30))
        run(compactor, request_record("steady", "c1", f"fold-{n}"))
    return answers


def test_the_edge_lives_in_the_state_and_a_stretch_without_a_new_fold_reads_nothing_more(api):
    session(api, "steady", exchanges=20)
    state = api.state("steady")
    assert state is not None
    assert {"windowEdge", "windowMemory"} <= state.keys()
    assert "windowEdge" not in (api.state("plain") or {})
    reads: list[str] = []
    client = api.handler.SERVICE._store._client
    client.meta.events.register("before-call.dynamodb", lambda model, **_: reads.append(model.name))
    api.converse("one more", tenant="steady")
    moved = (api.state("steady") or {})["windowEdge"] != state["windowEdge"]
    replaced = state["windowMemory"]["N"] != state["foldVersion"]["N"]
    # One read more only to serve the memory of the edge's move, which a newer fold replaced.
    extra = ["GetItem"] if replaced and not moved else []
    assert reads == ["Query", *extra, "TransactWriteItems"]


def test_a_tenant_switched_from_stable_to_sliding_loses_its_edge(api, make_api, rules_file):
    session(api, "steady", exchanges=4)
    assert "windowEdge" in (api.state("steady") or {})
    rules_file.write_text(json.dumps({"tenants": {"steady": {"maxTurnsPerConversation": 500}}}))
    status, _ = make_api().converse("sliding now", tenant="steady")
    assert status == 200
    assert (
        not {"windowEdge", "windowMemory", "windowWatermark"} & (api.state("steady") or {}).keys()
    )


@pytest.mark.parametrize(
    ("tenant", "moves_after_ten_minutes"), [("steady", True), ("hourly", False)]
)
def test_after_the_ttl_the_edge_moves_at_once_and_takes_the_newest_memory(
    api, make_api, rules_file, tenant, moves_after_ten_minutes
):
    rules = {**RULES["tenants"]["steady"], "promptCacheTtl": "1h" if tenant == "hourly" else "5m"}
    rules_file.write_text(json.dumps({"tenants": {tenant: rules}}))
    api = make_api()
    answers = session(api, tenant, exchanges=18)  # the next call needs no move: 22 messages
    state = api.state(tenant) or {}
    assert answers[-1]["window"]["kept"] > CAP // 2 + 1  # room to leave some out
    # Ten minutes after the last turn was recorded, on the service's clock.
    clock = api.handler.SERVICE._clock
    api.handler.SERVICE._clock = lambda: clock() + 600
    status, body = api.converse("back after a break", tenant=tenant)
    assert status == 200
    after = api.state(tenant) or {}
    assert (after["windowEdge"] != state["windowEdge"]) is moves_after_ten_minutes
    if moves_after_ten_minutes:
        assert body["window"]["kept"] <= CAP // 2 + 1
        memory = api.memory_item(tenant)
        assert body["memory"]["turnsFolded"] == int(memory["turnsFolded"]["N"])
    else:
        assert body["history"][: len(answers[-1]["history"])] == answers[-1]["history"]
