"""A conversation's data over HTTP (SPEC 10): export, the contacts listing, and erase.

On one shared runner over the example rules, as `make run` serves it; each
test uses contacts of its own, so the tests do not see each other's turns.
The same flows then go through `MemoryClient.over_http` (`turns()`,
`contacts()`, `forget()`) with no AWS configuration, as a reader runs it.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from botocore.httpsession import URLLib3Session

from conversation_memory_client import ExportedTurn, MemoryClient, NotFound
from tests.e2e.runner_process import Runner
from tests.support.no_aws_configuration import clear_aws_configuration

TENANT = "demo"
LISTED_TENANT = "campus-advisers"  # the listing tests' own tenant: only their contacts are in it
FOLD_WAIT_SECONDS = 30

CALL_ID = "call:weather-1"
QUESTION = "What is the weather in Paris, and should I take an umbrella?"
CALL: list[dict[str, Any]] = [
    {"text": "Let me look that up."},
    {
        "toolUse": {
            "toolUseId": CALL_ID,
            "name": "get_weather",
            # Kinds a store could change on the way: floats, null, booleans, empty
            # containers, a large integer, text outside ASCII.
            "input": {
                "city": "Paris",
                "days": [1, 2.5, None, True, False],
                "options": {"units": "metric", "extra": {}, "tags": []},
                "since": 12345678901234567890,
                "note": "pluie ☂ — 雨",
            },
        }
    },
]
USAGE: dict[str, int] = {
    "inputTokens": 1200,
    "outputTokens": 48,
    "totalTokens": 1248,
    "cacheReadInputTokens": 1024,
    "cacheWriteInputTokens": 0,
}
RESULTS: list[dict[str, Any]] = [
    {
        "toolResult": {
            "toolUseId": CALL_ID,
            "content": [{"json": {"tempC": 21.5, "rain": 0.1, "sky": "clear"}}, {"text": "met"}],
            "status": "success",
        }
    }
]
ANSWER: list[dict[str, Any]] = [{"text": "It is 21.5 °C and clear in Paris: no umbrella needed."}]


def _contact(prefix: str = "data") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _path(tenant: str, contact: str, tail: str = "") -> str:
    return f"/v1/tenants/{tenant}/contacts/{quote(contact, safe='')}{tail}"


def _canonical(value: Any) -> str:
    """The JSON text of a value, key order aside (a JSON object has none): a float that
    came back an integer, a boolean that came back a number, or any changed character
    is a difference; `==` on decoded JSON would let `1 == 1.0 == True` through."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _instant(text: str) -> datetime:
    instant = datetime.fromisoformat(text)
    assert instant.tzinfo is not None, f"{text!r} carries no offset"
    return instant


def _hold_the_tool_conversation(runner: Runner, tenant: str, contact: str) -> list[str]:
    """A question, a reply calling a tool (with Bedrock's usage), the tool's result, and
    the answer (without usage); the four message ids, in order."""
    ids = [f"{n}-{uuid.uuid4().hex[:8]}" for n in ("question", "call", "result", "answer")]
    steps = [
        ("converse", {"message": {"id": ids[0], "text": QUESTION}}, 200),
        ("turns", {"role": "assistant", "id": ids[1], "content": CALL, "usage": USAGE}, 201),
        ("converse", {"message": {"id": ids[2], "content": RESULTS}}, 200),
        ("turns", {"role": "assistant", "id": ids[3], "content": ANSWER}, 201),
    ]
    for route, body, expected in steps:
        status, _, answer = runner.request("POST", _path(tenant, contact, f"/{route}"), body)
        assert status == expected, answer
    return ids


def _export(runner: Runner, tenant: str, contact: str, query: str = "") -> tuple[int, Any]:
    status, _, body = runner.request("GET", _path(tenant, contact, "/turns") + query)
    return status, body


def _listed(runner: Runner, tenant: str, limit: int = 500) -> list[dict[str, Any]]:
    """Every contact of the tenant's listing, following `nextCursor` to the end."""
    contacts: list[dict[str, Any]] = []
    query = f"?limit={limit}"
    for _ in range(1000):
        status, _, page = runner.request("GET", f"/v1/tenants/{tenant}/contacts{query}")
        assert status == 200, page
        assert set(page) == {"contacts", "nextCursor"}
        contacts += page["contacts"]
        if page["nextCursor"] is None:
            return contacts
        query = f"?limit={limit}&cursor={quote(page['nextCursor'], safe='')}"
    pytest.fail("the listing never ended")


def _wait_for_memory(runner: Runner, tenant: str, contact: str) -> dict[str, Any]:
    deadline = time.monotonic() + FOLD_WAIT_SECONDS
    while time.monotonic() < deadline:
        status, _, body = runner.request("GET", _path(tenant, contact, "/memory"))
        assert status == 200, body
        if body["memory"]:
            return dict(body["memory"])
        time.sleep(0.25)
    pytest.fail("not folded within the wait")


def _hold_a_folded_conversation(runner: Runner, tenant: str, contact: str) -> str:
    """8 exchanges of 300 tokens (past MEMORY_FOLD_MIN_TOKENS), folded; the first id."""
    first_id = f"first-{uuid.uuid4().hex[:8]}"
    for n in range(8):
        message: dict[str, Any] = {"text": f"Question {n}. " + "q" * 600}
        if n == 0:
            message["id"] = first_id
        status, _, answer = runner.request(
            "POST", _path(tenant, contact, "/converse"), {"message": message}
        )
        assert status == 200, answer
        assert runner.reply(tenant, contact, f"Answer {n}. " + "a" * 600)[0] == 201
    _wait_for_memory(runner, tenant, contact)
    return first_id


# The export ------------------------------------------------------------------------------


def test_the_export_answers_every_turn_oldest_first_exactly_as_it_was_sent(
    shared_runner: Runner,
):
    contact = _contact()
    ids = _hold_the_tool_conversation(shared_runner, TENANT, contact)

    status, page = _export(shared_runner, TENANT, contact)

    assert status == 200, page
    assert page["nextCursor"] is None
    turns = page["turns"]
    assert [(t["id"], t["role"]) for t in turns] == list(
        zip(ids, ["user", "assistant", "user", "assistant"], strict=True)
    )
    sent = [[{"text": QUESTION}], CALL, RESULTS, ANSWER]
    assert [_canonical(t["content"]) for t in turns] == [_canonical(c) for c in sent]
    # Usage where one was recorded, and no `usage` member at all anywhere else.
    assert _canonical(turns[1]["usage"]) == _canonical(USAGE)
    assert ["usage" in t for t in turns] == [False, True, False, False]
    for turn in turns:
        assert {"id", "role", "sentAt", "recordedAt", "content"} <= set(turn)
        _instant(turn["recordedAt"])
    sent_at = [_instant(t["sentAt"]) for t in turns]
    assert sent_at == sorted(sent_at), "oldest first"


def test_the_export_pages_follow_the_cursor_to_a_last_page_whose_cursor_is_null(
    shared_runner: Runner,
):
    contact = _contact()
    _hold_the_tool_conversation(shared_runner, TENANT, contact)
    whole = _export(shared_runner, TENANT, contact)[1]["turns"]

    pages: list[dict[str, Any]] = []
    query = "?limit=1"
    while len(pages) < 10:
        status, page = _export(shared_runner, TENANT, contact, query)
        assert status == 200, page
        pages.append(page)
        if page["nextCursor"] is None:
            break
        query = f"?limit=1&cursor={quote(page['nextCursor'], safe='')}"

    assert [len(page["turns"]) for page in pages] == [1, 1, 1, 1], "no empty page at the end"
    assert [page["nextCursor"] is None for page in pages] == [False, False, False, True]
    assert [turn for page in pages for turn in page["turns"]] == whole

    status, two = _export(shared_runner, TENANT, contact, "?limit=2")
    assert (status, two["turns"]) == (200, whole[:2])
    status, rest = _export(
        shared_runner, TENANT, contact, f"?limit=500&cursor={quote(two['nextCursor'], safe='')}"
    )
    assert (status, rest) == (200, {"turns": whole[2:], "nextCursor": None})


def test_nothing_stored_is_404_not_found(shared_runner: Runner):
    status, body = _export(shared_runner, TENANT, _contact())

    assert (status, body["error"]["code"]) == (404, "not_found")


@pytest.mark.parametrize("limit", ["0", "501", "x", "-1", "1.5"])
@pytest.mark.parametrize("listing", ["turns", "contacts"])
def test_a_limit_out_of_range_or_not_an_integer_is_400_naming_limit(
    shared_runner: Runner, listing: str, limit: str
):
    contact = _contact()
    assert shared_runner.converse(TENANT, contact, "Hello")[0] == 200
    path = (
        _path(TENANT, contact, "/turns") if listing == "turns" else f"/v1/tenants/{TENANT}/contacts"
    )

    status, _, body = shared_runner.request("GET", f"{path}?limit={limit}")

    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert "limit" in body["error"]["message"]


def test_a_cursor_not_issued_for_the_listing_is_400_naming_cursor(shared_runner: Runner):
    mine, theirs = _contact(), _contact()
    for contact in (mine, theirs):
        _hold_the_tool_conversation(shared_runner, TENANT, contact)
    their_cursor = _export(shared_runner, TENANT, theirs, "?limit=1")[1]["nextCursor"]
    my_cursor = _export(shared_runner, TENANT, mine, "?limit=1")[1]["nextCursor"]
    for _ in range(2):
        assert shared_runner.converse(LISTED_TENANT, _contact("listed"), "Hello")[0] == 200
    status, _, listing = shared_runner.request(
        "GET", f"/v1/tenants/{LISTED_TENANT}/contacts?limit=1"
    )
    assert status == 200, listing
    assert listing["nextCursor"], listing
    other_tenants_cursor = listing["nextCursor"]
    body, digest = my_cursor.rsplit(".", 1)
    tampered = f"{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}.{digest}"

    refusals = {
        "another contact's": _export(
            shared_runner, TENANT, mine, f"?cursor={quote(their_cursor, safe='')}"
        ),
        "tampered": _export(shared_runner, TENANT, mine, f"?cursor={quote(tampered, safe='')}"),
        "garbage": _export(shared_runner, TENANT, mine, "?cursor=not-a-cursor"),
        "a contacts listing's": _export(
            shared_runner, TENANT, mine, f"?cursor={quote(other_tenants_cursor, safe='')}"
        ),
        "another tenant's listing's": shared_runner.request(
            "GET", f"/v1/tenants/{TENANT}/contacts?cursor={quote(other_tenants_cursor, safe='')}"
        )[::2],
        "a turns cursor on the listing": shared_runner.request(
            "GET", f"/v1/tenants/{TENANT}/contacts?cursor={quote(my_cursor, safe='')}"
        )[::2],
    }

    for kind, (status, answer) in refusals.items():
        assert status == 400, (kind, answer)
        assert answer["error"]["code"] == "invalid_request", kind
        assert "cursor" in answer["error"]["message"], kind
    # The cursor still serves the listing it was issued for.
    assert _export(shared_runner, TENANT, mine, f"?cursor={quote(my_cursor, safe='')}")[0] == 200


# The contacts listing --------------------------------------------------------------------


def test_the_listing_names_each_contact_once_with_its_last_message(shared_runner: Runner):
    contacts = [_contact("listed") for _ in range(3)]
    for contact in contacts:
        assert shared_runner.converse(LISTED_TENANT, contact, "Hello")[0] == 200
        assert shared_runner.reply(LISTED_TENANT, contact, "Hello, how can I help?")[0] == 201
    assert shared_runner.converse(LISTED_TENANT, contacts[0], "One more question")[0] == 200

    listed = _listed(shared_runner, LISTED_TENANT)
    one_by_one = _listed(shared_runner, LISTED_TENANT, limit=1)

    assert one_by_one == listed
    ids = [entry["contactId"] for entry in listed]
    assert len(ids) == len(set(ids)), "each contact once"
    by_id = {entry["contactId"]: entry for entry in listed}
    for contact in contacts:
        turns = _export(shared_runner, LISTED_TENANT, contact)[1]["turns"]
        last_question = [t for t in turns if t["role"] == "user"][-1]
        assert _instant(by_id[contact]["lastMessageAt"]) == _instant(last_question["sentAt"])
    # Another tenant's listing holds none of them.
    assert not set(contacts) & {entry["contactId"] for entry in _listed(shared_runner, TENANT)}


def test_an_unknown_tenant_is_404_for_every_data_route(shared_runner: Runner):
    answers = [
        shared_runner.request("GET", "/v1/tenants/no-such-tenant/contacts"),
        shared_runner.request("GET", _path("no-such-tenant", "c-1", "/turns")),
        shared_runner.request("DELETE", _path("no-such-tenant", "c-1")),
    ]

    assert [(status, body["error"]["code"]) for status, _, body in answers] == [
        (404, "unknown_tenant")
    ] * 3


# Erase -----------------------------------------------------------------------------------


def test_an_erase_leaves_nothing_served_and_the_next_message_starts_anew(
    shared_runner: Runner,
):
    contact = _contact("erased")
    first_id = _hold_a_folded_conversation(shared_runner, TENANT, contact)
    newest = _instant(
        _export(shared_runner, TENANT, contact, "?limit=500")[1]["turns"][-1]["recordedAt"]
    )
    assert contact in {entry["contactId"] for entry in _listed(shared_runner, TENANT)}

    status, _, erased = shared_runner.request("DELETE", _path(TENANT, contact))

    assert status == 200, erased
    assert erased["erased"]["items"] >= 16, "the turns, and the rest with them"
    assert erased["erased"]["complete"] is True
    assert _instant(erased["erasedAt"]) >= newest
    export_status, export = _export(shared_runner, TENANT, contact)
    assert (export_status, export["error"]["code"]) == (404, "not_found")
    memory_status, _, memory = shared_runner.request("GET", _path(TENANT, contact, "/memory"))
    assert (memory_status, memory["error"]["code"]) == (404, "not_found")
    assert contact not in {entry["contactId"] for entry in _listed(shared_runner, TENANT)}

    again_status, _, again = shared_runner.request("DELETE", _path(TENANT, contact))
    assert again_status == 200, again
    assert again["erased"] == {"items": 0, "complete": True}

    # The old message id, with other content: a new message, not a replay of the old one.
    status, _, anew = shared_runner.request(
        "POST",
        _path(TENANT, contact, "/converse"),
        {"message": {"id": first_id, "text": "Hello again, a new question."}},
    )
    assert status == 200, anew
    assert (anew["decision"], anew["turnCount"]) == ("model", 1)
    assert (anew["history"], anew["memory"], anew["converse"]["system"]) == ([], None, [])
    assert anew["current"]["content"] == [{"text": "Hello again, a new question."}]
    [turn] = _export(shared_runner, TENANT, contact)[1]["turns"]
    assert {k: v for k, v in turn.items() if k not in ("sentAt", "recordedAt")} == {
        "id": first_id,
        "role": "user",
        "content": [{"text": "Hello again, a new question."}],
    }
    assert _instant(turn["recordedAt"]) >= _instant(erased["erasedAt"])
    assert contact in {entry["contactId"] for entry in _listed(shared_runner, TENANT)}


def test_erasing_a_contact_with_nothing_stored_is_200_with_0_items(shared_runner: Runner):
    status, _, erased = shared_runner.request("DELETE", _path(TENANT, _contact()))

    assert status == 200, erased
    assert erased["erased"] == {"items": 0, "complete": True}
    _instant(erased["erasedAt"])


def test_an_erase_of_one_contact_leaves_the_others_whole(shared_runner: Runner):
    erased, kept = _contact("erased"), _contact("kept")
    for contact in (erased, kept):
        _hold_the_tool_conversation(shared_runner, TENANT, contact)
    before = _export(shared_runner, TENANT, kept)[1]

    assert shared_runner.request("DELETE", _path(TENANT, erased))[0] == 200

    assert _export(shared_runner, TENANT, kept) == (200, before)
    assert shared_runner.request("GET", _path(TENANT, kept, "/memory"))[0] == 200


# Through the client ----------------------------------------------------------------------


class Observed:
    """botocore's own HTTP session, keeping every request sent."""

    def __init__(self) -> None:
        self.inner = URLLib3Session()
        self.sent: list[Any] = []

    def send(self, request: Any) -> Any:
        self.sent.append(request)
        return self.inner.send(request)


@pytest.fixture
def client(
    shared_runner: Runner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[MemoryClient, Observed]:
    """As a reader runs it against `make run`: no AWS configuration, requests unsigned."""
    clear_aws_configuration(monkeypatch, tmp_path)
    observed = Observed()
    return MemoryClient.over_http(shared_runner.base_url, http_session=observed), observed


def _hold_through(memory: MemoryClient, contact: str) -> list[str]:
    question = memory.converse(TENANT, contact, QUESTION)
    call = memory.record(TENANT, contact, role="assistant", content=CALL, usage=USAGE)
    result = memory.converse(TENANT, contact, content=RESULTS)
    answer = memory.record(TENANT, contact, role="assistant", content=ANSWER)
    return [question.message_id, call.id, result.message_id, answer.id]


def test_the_clients_turns_pages_through_the_export_as_it_goes(
    shared_runner: Runner, client: tuple[MemoryClient, Observed]
):
    memory, observed = client
    contact = _contact("client")
    ids = _hold_through(memory, contact)
    observed.sent.clear()

    turns = memory.turns(TENANT, contact, page_size=1)
    assert observed.sent == [], "nothing is fetched before the iteration"
    first = next(turns)
    assert len(observed.sent) == 1
    exported = [first, *turns]

    assert all(isinstance(turn, ExportedTurn) for turn in exported)
    assert [turn.id for turn in exported] == ids
    assert [turn.role for turn in exported] == ["user", "assistant", "user", "assistant"]
    sent = [[{"text": QUESTION}], CALL, RESULTS, ANSWER]
    assert [_canonical(turn.content) for turn in exported] == [_canonical(c) for c in sent]
    assert [turn.usage for turn in exported] == [None, USAGE, None, None]
    assert [turn.raw for turn in exported] == _export(shared_runner, TENANT, contact)[1]["turns"]
    queries = [parse_qs(urlsplit(request.url).query) for request in observed.sent]
    assert [query["limit"] for query in queries] == [["1"]] * 4
    assert ["cursor" in query for query in queries] == [False, True, True, True]
    assert all("Authorization" not in request.headers for request in observed.sent)

    with pytest.raises(ValueError, match="page_size"):
        memory.turns(TENANT, contact, page_size=501)
    with pytest.raises(ValueError, match="page_size"):
        memory.contacts(TENANT, page_size=0)
    assert len(observed.sent) == 4, "a bad page size sends nothing"


def test_the_client_lists_contacts_and_forgets_one(
    shared_runner: Runner, client: tuple[MemoryClient, Observed]
):
    memory, _ = client
    contact, other = _contact("client"), _contact("client")
    first_id = _hold_through(memory, contact)[0]
    _hold_through(memory, other)

    listed = {entry.contact_id: entry for entry in memory.contacts(TENANT, page_size=1)}
    assert {contact, other} <= set(listed)
    question_sent_at = next(memory.turns(TENANT, contact)).sent_at
    last_message_at = listed[contact].last_message_at
    assert last_message_at is not None
    assert _instant(last_message_at) == _instant(question_sent_at)

    erasure = memory.forget(TENANT, contact)

    assert (erasure.items > 0, erasure.complete) == (True, True)
    _instant(erasure.erased_at)
    with pytest.raises(NotFound) as nothing:
        next(memory.turns(TENANT, contact))
    assert nothing.value.code == "not_found"
    with pytest.raises(NotFound):
        memory.memory(TENANT, contact)
    listed_after = {entry.contact_id for entry in memory.contacts(TENANT, page_size=500)}
    assert contact not in listed_after
    assert other in listed_after
    assert len(list(memory.turns(TENANT, other))) == 4

    again = memory.forget(TENANT, contact)
    assert (again.items, again.complete) == (0, True)

    anew = memory.converse(TENANT, contact, "A new question", message_id=first_id)
    assert (anew.turn_count, anew.memory, anew.raw["history"]) == (1, None, [])
    [turn] = memory.turns(TENANT, contact)
    assert (turn.id, turn.content) == (first_id, [{"text": "A new question"}])
