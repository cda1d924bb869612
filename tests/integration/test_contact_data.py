"""SPEC 10 through the handler on moto: export a contact's turns, list contacts, erase a contact."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_items import marker_item, turn_item
from converse_history.access import Caller
from local.proxy_events import LambdaContextStandIn
from memory_core.turns import Turn
from tests.integration.conftest import TABLE, Api, log_lines, minutes_ago

CONTEXT = LambdaContextStandIn(function_name="compactor-local")
ANYONE = Caller(arn=None, identity_required=False)
CONTACT = "/v1/tenants/acme/contacts/c1"
TOOL_USE = {"toolUse": {"toolUseId": "t-1", "name": "lookup", "input": {"case": 42, "n": 1.5}}}
TOOL_RESULT = {"toolResult": {"toolUseId": "t-1", "content": [{"json": {"found": [1, 2]}}]}}
USAGE = {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150}


def export(api: Api, path: str = CONTACT, **query: Any) -> tuple[int, Any]:
    suffix = "&".join(f"{k}={v}" for k, v in query.items())
    return api.request("GET", f"{path}/turns" + (f"?{suffix}" if suffix else ""))


def all_turns(api: Api, path: str = CONTACT, limit: int = 100) -> list[dict[str, Any]]:
    turns, cursor = [], None
    while True:
        status, page = export(api, path, limit=limit, **({"cursor": cursor} if cursor else {}))
        assert status == 200, page
        turns += page["turns"]
        cursor = page["nextCursor"]
        if cursor is None:
            return turns


def erase(api: Api, path: str = CONTACT, caller: str | None = None) -> tuple[int, Any]:
    return api.request("DELETE", path, caller=caller)


def record(api: Api, body: dict[str, Any], contact: str = "c1") -> tuple[int, Any]:
    return api.request("POST", f"/v1/tenants/acme/contacts/{contact}/turns", body)


def a_tool_exchange(api: Api, start_minutes: float = 30) -> None:
    api.converse("find case 42", sent_at=minutes_ago(start_minutes), message_id="q-1")
    assert (
        record(
            api,
            {
                "role": "assistant",
                "id": "a-1",
                "content": [{"text": "Looking it up."}, TOOL_USE],
                "usage": USAGE,
                "sentAt": _iso(minutes_ago(start_minutes - 1)),
            },
        )[0]
        == 201
    )
    assert (
        record(
            api,
            {
                "role": "user",
                "id": "r-1",
                "content": [TOOL_RESULT],
                "sentAt": _iso(minutes_ago(start_minutes - 2)),
            },
        )[0]
        == 201
    )


def _iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- export ------------------------------------------------------------------------------


def test_the_export_is_every_turn_oldest_first_exactly_as_recorded(api):
    a_tool_exchange(api)
    long_text = "clause " * 3000  # far over HISTORY_MESSAGE_MAX_TOKENS: a window trims it
    api.converse(long_text, sent_at=minutes_ago(10), message_id="q-2")

    turns = all_turns(api)

    assert [t["id"] for t in turns] == ["q-1", "a-1", "r-1", "q-2"]
    assert turns[1]["content"] == [{"text": "Looking it up."}, TOOL_USE]
    assert turns[2]["content"] == [TOOL_RESULT]
    assert turns[3]["content"] == [{"text": long_text}]
    assert turns[1]["usage"] == USAGE
    assert ["usage" in t for t in turns] == [False, True, False, False]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "user"]
    assert all(t["recordedAt"] >= t["sentAt"] for t in turns)


def test_folded_turns_and_turns_older_than_the_history_range_are_exported(api):
    # acme's historyDays is 30; the turns live as long as the retention (30 days) allows.
    old = minutes_ago(60 * 24 * 29.5)
    api.converse("an old question", sent_at=old, message_id="old-1")
    for n in range(12):
        api.converse(f"question {n} " + "q" * 900, sent_at=minutes_ago(60 - n), message_id=f"n-{n}")
    compactor = api.compactor()
    compactor.lambda_handler({"Records": api.received()}, CONTEXT)
    assert api.state()["foldVersion"]["N"] == "1"

    ids = [t["id"] for t in all_turns(api)]

    assert ids == ["old-1", *(f"n-{n}" for n in range(12))]


def test_a_turn_past_its_ttl_is_never_exported(api):
    # Past its TTL as it is written: DynamoDB would keep it for days before deleting it.
    api.converse("expired", sent_at=minutes_ago(60 * 24 * 70), message_id="gone")
    api.converse("alive", sent_at=minutes_ago(5), message_id="here")
    assert any(i.get("turnId", {}).get("S") == "gone" for i in api.items())

    assert [t["id"] for t in all_turns(api)] == ["here"]


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5])
def test_pages_of_every_size_give_every_turn_once_and_end_with_a_null_cursor(api, limit):
    a_tool_exchange(api)
    api.converse("one more", sent_at=minutes_ago(5), message_id="q-2")

    status, first = export(api, limit=limit)

    assert status == 200
    assert len(first["turns"]) == min(limit, 4)
    # Exactly `limit` turns left: the page that takes them is the last.
    assert (first["nextCursor"] is None) == (limit >= 4)
    assert [t["id"] for t in all_turns(api, limit=limit)] == ["q-1", "a-1", "r-1", "q-2"]


def test_a_cursor_after_everything_was_erased_gives_an_empty_last_page(api):
    a_tool_exchange(api)
    _, first = export(api, limit=1)
    assert erase(api)[0] == 200

    status, page = export(api, limit=1, cursor=first["nextCursor"])

    assert (status, page) == (200, {"turns": [], "nextCursor": None})


@pytest.mark.parametrize("limit", ["0", "501", "-1", "ten", "1.5", ""])
def test_a_limit_outside_1_to_500_is_400_naming_limit(api, limit):
    a_tool_exchange(api)
    status, answer = export(api, limit=limit)
    assert status == 400
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith("limit")


def test_limits_500_and_1_are_accepted(api):
    a_tool_exchange(api)
    assert export(api, limit=500)[0] == 200
    assert export(api, limit=1)[0] == 200


def _cursor_of(api: Api, path: str) -> str:
    status, page = export(api, path, limit=1)
    assert status == 200, page
    cursor: str = page["nextCursor"]
    return cursor


def _flip(cursor: str) -> str:
    body, _, digest = cursor.partition(".")
    return body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + digest


@pytest.mark.parametrize(
    "forge",
    [
        lambda mine, theirs, other_tenant: "garbage",
        lambda mine, theirs, other_tenant: _flip(mine),
        lambda mine, theirs, other_tenant: mine.partition(".")[0] + ".0123456789abcdef",
        lambda mine, theirs, other_tenant: theirs,
        lambda mine, theirs, other_tenant: other_tenant,
    ],
    ids=["garbage", "edited", "digest-forged", "another-contact", "another-tenant"],
)
def test_a_cursor_not_issued_for_this_listing_is_400_naming_cursor(api, forge):
    for contact, tenant in (("c1", "acme"), ("c2", "acme"), ("c1", "roomy")):
        for n in range(2):
            api.converse(f"hello {n}", contact=contact, tenant=tenant, sent_at=minutes_ago(9 - n))
    mine = _cursor_of(api, CONTACT)
    theirs = _cursor_of(api, "/v1/tenants/acme/contacts/c2")
    other_tenant = _cursor_of(api, "/v1/tenants/roomy/contacts/c1")

    status, answer = export(api, cursor=forge(mine, theirs, other_tenant))

    assert status == 400
    assert answer["error"]["message"].startswith("cursor")


def test_a_contact_with_nothing_stored_is_404_and_an_unknown_tenant_too(api):
    status, answer = export(api)
    assert (status, answer["error"]["code"]) == (404, "not_found")
    status, answer = export(api, "/v1/tenants/nobody/contacts/c1")
    assert (status, answer["error"]["code"]) == (404, "unknown_tenant")


# -- contacts ----------------------------------------------------------------------------


def contacts(api: Api, tenant: str = "acme", **query: Any) -> list[dict[str, Any]]:
    found, cursor = [], None
    while True:
        extra: dict[str, str] = {"cursor": cursor} if cursor else {}
        suffix = "&".join(f"{k}={v}" for k, v in {**query, **extra}.items())
        status, page = api.request("GET", f"/v1/tenants/{tenant}/contacts?{suffix}")
        assert status == 200, page
        found += page["contacts"]
        cursor = page["nextCursor"]
        if cursor is None:
            return found


@pytest.mark.parametrize("limit", [1, 3, 7, 20, 21, 100])
def test_the_contacts_with_anything_stored_are_listed_once_in_pages(api, limit):
    ids = [f"contact-{n:02d}" for n in range(20)]
    for n, contact in enumerate(ids):
        api.converse("hello", contact=contact, sent_at=minutes_ago(40 - n))
    record(api, {"role": "assistant", "text": "a note"}, contact="replies-only")
    api.converse("hello", tenant="roomy", contact="elsewhere")

    listed = contacts(api, limit=limit)

    assert sorted(c["contactId"] for c in listed) == sorted([*ids, "replies-only"])
    by_id = {c["contactId"]: c for c in listed}
    assert by_id["replies-only"]["lastMessageAt"] is None
    assert by_id["contact-00"]["lastMessageAt"] < by_id["contact-19"]["lastMessageAt"]


def test_the_index_keys_are_written_when_a_conversation_starts_and_never_again(api):
    updates: list[str] = []

    def watch(params: dict[str, Any], **_: Any) -> None:
        for item in params.get("TransactItems", []):
            if "Update" in item:
                updates.append(item["Update"]["UpdateExpression"])

    api.handler.DYNAMODB.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems", watch
    )
    for n in range(3):
        api.converse(f"message {n}", sent_at=minutes_ago(9 - n))
    assert ["contactsShard =" in update for update in updates] == [True, False, False]
    assert contacts(api) == [
        {"contactId": "c1", "lastMessageAt": contacts(api)[0]["lastMessageAt"]}
    ]


def test_a_contact_listing_cursor_of_another_tenant_is_400_naming_cursor(api):
    for n in range(3):
        api.converse("hi", tenant="roomy", contact=f"r{n}")
        api.converse("hi", contact=f"a{n}")
    _, page = api.request("GET", "/v1/tenants/roomy/contacts?limit=1")
    status, answer = api.request("GET", f"/v1/tenants/acme/contacts?cursor={page['nextCursor']}")
    assert status == 400
    assert answer["error"]["message"].startswith("cursor")


# -- erase -------------------------------------------------------------------------------


def test_an_erase_leaves_nothing_served_and_nothing_stored_but_its_fence(api, logs, capsys):
    a_tool_exchange(api)
    for n in range(12):
        api.converse(f"question {n} " + "q" * 900, sent_at=minutes_ago(20 - n))
    api.compactor().lambda_handler({"Records": api.received()}, CONTEXT)
    assert any(i["SK"]["S"].startswith("FOLD#") for i in api.items())
    api.converse("other contact", contact="c2")
    stored = len([i for i in api.items() if i["PK"]["S"].endswith("#CONTACT#c1")])
    capsys.readouterr()

    status, answer = erase(api)

    assert status == 200
    assert answer["erased"] == {"items": stored, "complete": True}
    left = [i for i in api.items() if i["PK"]["S"].endswith("#CONTACT#c1")]
    assert [i["SK"]["S"] for i in left] == ["TURN#~STATE"]
    assert set(left[0]) == {"PK", "SK", "version", "foldVersion", "erasedAt", "expiresAt"}
    assert export(api)[0] == 404
    assert api.request("GET", f"{CONTACT}/memory")[0] == 404
    assert [c["contactId"] for c in contacts(api)] == ["c2"]
    assert [t["id"] for t in all_turns(api, "/v1/tenants/acme/contacts/c2")]
    output = logs.getvalue() + capsys.readouterr().out
    erased = [line for line in log_lines(output) if line.get("message") == "contact_erased"]
    assert len(erased) == 1
    assert (erased[0]["tenant"], erased[0]["items"]) == ("acme", stored)
    assert "c1" not in erased[0].values()  # the contact's id may be personal data
    assert "find case" not in output
    metrics = [line for line in log_lines(output) if "ContactsErased" in line]
    assert [m["ContactsErased"] for m in metrics] == [[1.0]]


def test_after_an_erase_the_next_converse_starts_a_new_conversation(api):
    for n in range(5):
        api.converse(f"message {n}", sent_at=minutes_ago(20 - n), message_id=f"m-{n}")
    assert erase(api)[0] == 200

    # An old id, with other content: a new message, not a replay nor a 409.
    status, answer = api.converse("a new beginning", message_id="m-3")

    assert status == 200, answer
    assert (answer["turnCount"], answer["history"], answer["memory"]) == (1, [], None)
    assert [t["id"] for t in all_turns(api)] == ["m-3"]
    assert all_turns(api)[0]["content"] == [{"text": "a new beginning"}]
    # And its retry is a replay of the new one.
    assert api.converse("a new beginning", message_id="m-3")[1]["turnCount"] == 1


def test_an_old_reply_id_sent_again_after_an_erase_is_a_new_turn(api):
    a_tool_exchange(api)
    assert erase(api)[0] == 200

    status, answer = record(api, {"role": "assistant", "id": "a-1", "text": "fresh"})

    assert status == 201, answer
    assert [(t["id"], t["content"]) for t in all_turns(api)] == [("a-1", [{"text": "fresh"}])]


def test_an_erase_is_idempotent_and_an_unknown_contact_erases_nothing(api):
    a_tool_exchange(api)
    assert erase(api)[1]["erased"]["items"] > 0
    items = api.items()

    status, answer = erase(api)

    assert (status, answer["erased"]) == (200, {"items": 0, "complete": True})
    assert api.items() == items
    status, answer = erase(api, "/v1/tenants/acme/contacts/never-seen")
    assert (status, answer["erased"]["items"]) == (200, 0)
    assert api.items() == items


def test_a_rate_limited_contact_is_free_again_after_an_erase(api):
    for n in range(3):
        assert api.converse(f"m{n}", tenant="limited")[0] == 200
    assert api.converse("too many", tenant="limited")[0] == 429
    assert erase(api, "/v1/tenants/limited/contacts/c1")[0] == 200
    assert api.converse("again", tenant="limited")[0] == 200


def test_a_compaction_paused_mid_fold_writes_nothing_back_after_an_erase(api):
    for n in range(12):
        api.converse(f"question {n} " + "q" * 900, sent_at=minutes_ago(30 - n))
    compactor = api.compactor()
    summariser = compactor.COMPACTOR._summariser
    original = summariser.summarise
    erased: list[Any] = []

    def erase_while_summarising(previous, turns, max_tokens):
        erased.append(erase(api))  # the compaction has read and claimed; it is paused here
        return original(previous, turns, max_tokens)

    summariser.summarise = erase_while_summarising

    outcome = compactor.COMPACTOR.compact(ConversationKey("acme", "c1"))

    assert erased[0][0] == 200
    assert outcome.outcome.value == "lost_race"
    left = [i for i in api.items() if i["PK"]["S"].endswith("#CONTACT#c1")]
    assert [i["SK"]["S"] for i in left] == ["TURN#~STATE"]
    assert "foldSummary" not in left[0]
    assert api.request("GET", f"{CONTACT}/memory")[0] == 404
    _, answer = api.converse("hello again")
    assert (answer["turnCount"], answer["memory"]) == (1, None)


def erase_before_the_next(api: Api, commit_name: str) -> None:
    """The next commit of that name erases the contact c1 first, then commits."""
    store = api.handler.STORE
    commit = getattr(store, commit_name)

    def erase_first(*args: Any, **kwargs: Any) -> None:
        setattr(store, commit_name, commit)
        assert api.handler.DATA.erasure.erase("acme", "c1", ANYONE).complete
        commit(*args, **kwargs)

    setattr(store, commit_name, erase_first)


def test_a_reply_that_arrived_before_an_erase_and_commits_after_it_is_a_new_turn(api):
    a_tool_exchange(api)
    erase_before_the_next(api, "record_reply")  # the reply's arrival is stamped before it

    status, answer = record(api, {"role": "assistant", "id": "late", "text": "in flight"})

    assert status == 201, answer
    turns = all_turns(api)
    assert [t["id"] for t in turns] == ["late"]
    fence = api.state()["erasedAt"]["S"]
    assert turns[0]["recordedAt"] > fence


def test_a_caller_of_another_tenant_erases_nothing(make_api):
    guarded = make_api(CALLER_IDENTITY="required")
    role = "arn:aws:iam::123456789012:role/acme-agent"
    guarded.converse("mine", tenant="guarded", caller=role)
    before = guarded.items()
    status, answer = erase(
        guarded, "/v1/tenants/guarded/contacts/c1", caller="arn:aws:iam::1:role/x"
    )
    assert (status, answer["error"]["code"]) == (403, "forbidden")
    assert guarded.items() == before


# -- a large erase -----------------------------------------------------------------------


def seed(api: Api, pairs: int, contact: str = "big") -> None:
    """`pairs` turns and their markers written straight to the table (2 items each)."""
    partition = ConversationKey("acme", contact).partition
    start = minutes_ago(60 * 24 * 10)
    items = []
    for n in range(pairs):
        at = start + timedelta(seconds=10 * n)
        turn = Turn(f"t{n:05d}", "user", ({"text": f"message {n}"},), at, at)
        ttl = int((at + timedelta(days=30)).timestamp())
        items.append(
            turn_item(
                partition, turn, encoded=json.dumps([{"text": f"message {n}"}]), tokens=3, ttl=ttl
            )
        )
        items.append(marker_item(partition, turn, ttl=ttl))
    for begin in range(0, len(items), 25):
        api.dynamodb.batch_write_item(
            RequestItems={TABLE: [{"PutRequest": {"Item": i}} for i in items[begin : begin + 25]]}
        )


def test_twenty_thousand_items_are_erased_through_the_queue(api):
    seed(api, 10_000)
    api.converse("the newest", contact="big")
    path = "/v1/tenants/acme/contacts/big"

    status, answer = erase(api, path)

    assert status == 202
    assert answer["erased"]["complete"] is False
    first_share = answer["erased"]["items"]
    assert 5000 <= first_share < 20_003
    # Nothing recorded before the erase is served while the rest is deleted.
    assert export(api, path)[0] == 404
    assert api.converse("new", contact="big")[1]["history"] == []
    compactor = api.compactor()
    shares = 0
    while records := api.received():
        assert compactor.lambda_handler({"Records": records}, CONTEXT) == {"batchItemFailures": []}
        shares += 1
    assert shares >= 2  # 20,000 items at 5,000 a share: the queue carried it on, share by share
    left = [i for i in api.items() if i["PK"]["S"].endswith("#CONTACT#big")]
    # The state with the fence, and the message recorded since and its marker.
    assert len(left) == 3
    assert [t["content"] for t in all_turns(api, path)] == [[{"text": "new"}]]


def test_unprocessed_deletes_are_retried(api, monkeypatch):
    seed(api, 60)
    store = api.handler.STORE
    client = store._client
    real = client.batch_write_item
    handed_back: list[list[dict[str, Any]]] = []

    def throttled_once(**kwargs: Any) -> dict[str, Any]:
        requests = kwargs["RequestItems"][TABLE]
        if not handed_back:
            handed_back.append(requests[10:])
            real(RequestItems={TABLE: requests[:10]})
            return {"UnprocessedItems": {TABLE: requests[10:]}}
        answer: dict[str, Any] = real(**kwargs)
        return answer

    monkeypatch.setattr(client, "batch_write_item", throttled_once)
    monkeypatch.setattr(store, "sleep", lambda seconds: None)

    status, answer = erase(api, "/v1/tenants/acme/contacts/big")

    assert (status, answer["erased"]) == (200, {"items": 120, "complete": True})
    assert len(handed_back[0]) == 15
    left = [i["SK"]["S"] for i in api.items() if i["PK"]["S"].endswith("#CONTACT#big")]
    assert left == ["TURN#~STATE"]


def test_a_message_stamped_before_the_erase_joins_the_new_conversation_after_it(api):
    a_tool_exchange(api)
    _, erasure = erase(api)
    stamped = minutes_ago(20)

    status, answer = api.converse("sent earlier, delivered now", sent_at=stamped)

    assert (status, answer["turnCount"], answer["history"]) == (200, 1, [])
    (turn,) = all_turns(api)
    assert turn["sentAt"] > erasure["erasedAt"]
    assert turn["statedSentAt"] == _iso(stamped)


def test_a_message_in_flight_while_the_contact_is_erased_starts_the_new_conversation(api):
    for n in range(4):
        api.converse(f"before {n}", sent_at=minutes_ago(10 - n))
    erase_before_the_next(api, "record_contact_turn")  # read before it, committed after it

    status, answer = api.converse("in flight", message_id="flight")

    assert status == 200, answer
    assert (answer["turnCount"], answer["history"], answer["memory"]) == (1, [], None)
    assert [t["id"] for t in all_turns(api)] == ["flight"]


def test_without_its_queue_the_compactor_carries_an_erase_on_at_each_delivery(api):
    seed(api, 30)
    api.handler.DATA.erasure._deletion._items_per_invocation = 10
    status, answer = erase(api, "/v1/tenants/acme/contacts/big")
    assert (status, answer["erased"]) == (202, {"items": 10, "complete": False})
    api.monkeypatch.delenv("COMPACTION_QUEUE_URL")
    compactor = api.compactor()
    compactor.ERASURE._items_per_invocation = 10
    (share,) = api.received()

    def stored() -> int:
        return len([i for i in api.items() if i["PK"]["S"].endswith("#CONTACT#big")])

    outcomes = []
    while stored() > 1:
        outcomes.append(compactor.lambda_handler({"Records": [share]}, CONTEXT))
    # Each delivery deleted its share, and failed so that the record comes back for the rest.
    assert outcomes[:-1] == [{"batchItemFailures": [{"itemIdentifier": share["messageId"]}]}] * 4
    assert outcomes[-1] == {"batchItemFailures": []}
    # Nothing else was queued: the same record came back each time.
    assert [r["messageId"] for r in api.received()] == [share["messageId"]]


@pytest.mark.parametrize(("stored", "limit", "pages"), [(5, 5, 1), (5, 4, 2), (6, 3, 2), (0, 3, 1)])
def test_the_contacts_listing_ends_on_its_last_page_not_after_it(api, stored, limit, pages):
    for n in range(stored):
        api.converse("hello", contact=f"p{n}")
    seen, cursor, count = [], None, 0
    while True:
        query = f"limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        status, page = api.request("GET", f"/v1/tenants/acme/contacts?{query}")
        assert status == 200
        count += 1
        seen += page["contacts"]
        assert page["contacts"] or stored == 0  # never an empty page after the last one
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert (count, len(seen)) == (pages, stored)
