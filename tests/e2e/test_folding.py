"""Through `make run`'s runner: a long conversation is folded within seconds, locally."""

from __future__ import annotations

import time
import uuid

from tests.e2e.runner_process import Runner

FOLD_WAIT_SECONDS = 30


def test_a_conversation_past_the_fold_trigger_is_folded_and_the_next_converse_has_the_memory(
    shared_runner: Runner,
):
    contact = f"long-{uuid.uuid4().hex[:8]}"
    for n in range(8):
        # 8 x (150 + 150) tokens: past MEMORY_FOLD_MIN_TOKENS (2000) on the 7th pair.
        assert shared_runner.converse("demo", contact, f"Question {n}. " + "q" * 600)[0] == 200
        assert shared_runner.reply("demo", contact, f"Answer {n}. " + "a" * 600)[0] == 201

    memory = None
    deadline = time.monotonic() + FOLD_WAIT_SECONDS
    while time.monotonic() < deadline:
        status, _, body = shared_runner.request(
            "GET", f"/v1/tenants/demo/contacts/{contact}/memory"
        )
        assert status == 200
        if body["memory"]:
            memory = body
            break
        time.sleep(0.25)
    assert memory is not None, "not folded within the wait"
    assert memory["memory"]["turnsFolded"] >= 12
    assert memory["counters"]["compactionInFlight"] is False

    status, answer = shared_runner.converse("demo", contact, "What did we cover so far?")
    assert status == 200
    assert answer["memory"]["summary"] == memory["memory"]["summary"]
    assert "Question 0" in answer["memory"]["summary"]
    assert answer["converse"]["system"][1] == {"cachePoint": {"type": "default"}}
