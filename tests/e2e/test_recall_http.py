"""Through `make run`'s runner: a clause folded away is recalled word for word, over HTTP and
through the client, and a bad recall is refused naming its field."""

from __future__ import annotations

import time
import uuid

from conversation_memory_client import MemoryClient
from tests.e2e.runner_process import Runner

FOLD_WAIT_SECONDS = 30
CLAUSE = (
    "Clause 14.2: The Supplier shall indemnify the Customer against every loss arising "
    "from a breach of warranty, notified in writing within thirty (30) days."
)


def folded(runner: Runner, contact: str) -> None:
    deadline = time.monotonic() + FOLD_WAIT_SECONDS
    while time.monotonic() < deadline:
        _, _, body = runner.request("GET", f"/v1/tenants/demo/contacts/{contact}/memory")
        if body["memory"]:
            return
        time.sleep(0.25)
    raise AssertionError("not folded within the wait")


def test_a_folded_clause_is_recalled_word_for_word_over_http(shared_runner: Runner):
    contact = f"recall-{uuid.uuid4().hex[:8]}"
    assert shared_runner.converse("demo", contact, CLAUSE)[0] == 200
    for n in range(8):  # past the fold trigger: the clause is folded and indexed
        assert shared_runner.reply("demo", contact, f"Answer {n}. " + "a" * 600)[0] == 201
        assert shared_runner.converse("demo", contact, f"Question {n}. " + "q" * 600)[0] == 200
    folded(shared_runner, contact)

    status, _, body = shared_runner.request(
        "POST",
        f"/v1/tenants/demo/contacts/{contact}/recall",
        {"query": "indemnify warranty", "limit": 2},
    )

    assert status == 200, body
    assert body["passages"][0]["turn"]["content"] == [{"text": CLAUSE}]
    client = MemoryClient.over_http(shared_runner.base_url)
    result = client.recall("demo", contact, "indemnify warranty", limit=2)
    assert result.passages[0].turn.content == [{"text": CLAUSE}]


def test_a_bad_recall_is_refused_naming_its_field_and_another_contact_finds_nothing(
    shared_runner: Runner,
):
    contact = f"recall-{uuid.uuid4().hex[:8]}"
    assert shared_runner.converse("demo", contact, CLAUSE)[0] == 200
    path = f"/v1/tenants/demo/contacts/{contact}/recall"

    status, _, body = shared_runner.request("POST", path, {"query": "clause", "limit": 21})
    assert status == 400, body
    assert body["error"]["message"].startswith("limit")
    status, _, body = shared_runner.request("POST", path, {"query": "  "})
    assert status == 400, body
    assert body["error"]["message"].startswith("query")

    status, _, body = shared_runner.request(
        "POST", f"/v1/tenants/demo/contacts/{contact}-other/recall", {"query": "indemnify"}
    )
    assert (status, body) == (200, {"passages": []})
