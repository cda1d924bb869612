"""`POST .../recall` through the handler and the compactor on moto: the exact words of older
turns, from recall's index and the unfolded turns; isolation, refusals, nothing recorded."""

from __future__ import annotations

import sys
import zlib
from datetime import datetime, timedelta
from typing import Any

import pytest

from local.proxy_events import LambdaContextStandIn
from memory_core.recall import rank
from memory_core.turns import Turn
from tests.integration.conftest import AGENT_ROLE, TABLE, Api, minutes_ago

CONTEXT = LambdaContextStandIn(function_name="compactor-local")
CLAUSE = (
    "Clause 14.2: The Supplier shall indemnify the Customer against every loss arising "
    "from a breach of warranty, notified in writing within thirty (30) days."
)


def recall(
    api: Api, body: Any, *, tenant: str = "roomy", contact: str = "c1", **kw: Any
) -> tuple[int, Any]:
    return api.request("POST", f"/v1/tenants/{tenant}/contacts/{contact}/recall", body, **kw)


def talk(
    api: Api,
    pairs: int,
    *,
    tenant: str = "roomy",
    contact: str = "c1",
    first: str = "",
    start_minutes_ago: float | None = None,
    prefix: str = "",
) -> None:
    start = minutes_ago(start_minutes_ago if start_minutes_ago is not None else 2 * pairs + 30)
    for n in range(pairs):
        at = start + timedelta(minutes=2 * n)
        text = (
            first if n == 0 and first else f"question {n} about the delivery schedule " + "q" * 300
        )
        api.converse(text, tenant=tenant, contact=contact, sent_at=at, message_id=f"{prefix}q{n}")
        api.reply(
            f"answer {n} on the schedule " + "a" * 300,
            tenant=tenant,
            contact=contact,
            sent_at=at + timedelta(minutes=1),
            message_id=f"{prefix}a{n}",
        )


def fold_all(api: Api) -> int:
    """Run the compactor on every queued request until none is left; the folds made."""
    compactor = api.compactor()
    folds = 0
    while requests := api.received():
        answer = compactor.lambda_handler({"Records": requests}, CONTEXT)
        assert answer == {"batchItemFailures": []}
        folds += len(requests)
    return folds


def segment_keys(api: Api) -> list[str]:
    return sorted(i["SK"]["S"] for i in api.items() if i["SK"]["S"].startswith("RECALL#"))


def test_a_folded_clause_comes_back_word_for_word(api):
    talk(api, 40, first=CLAUSE)
    assert fold_all(api) > 0
    assert segment_keys(api), "the compactor wrote no index segment"

    status, body = recall(api, {"query": "indemnify breach of warranty", "limit": 3})

    assert status == 200, body
    best = body["passages"][0]
    assert best["turn"]["content"] == [{"text": CLAUSE}]
    assert best["turn"]["id"] == "q0"
    assert best["turn"]["role"] == "user"
    assert best["score"] > 0
    assert len(body["passages"]) <= 3


def exported_turns(api: Api, tenant: str = "roomy", contact: str = "c1") -> list[Turn]:
    status, body = api.request("GET", f"/v1/tenants/{tenant}/contacts/{contact}/turns?limit=500")
    assert status == 200, body
    return [
        Turn(
            t["id"],
            t["role"],
            t["content"],
            datetime.fromisoformat(t["sentAt"]),
            datetime.fromisoformat(t["recordedAt"]),
        )
        for t in body["turns"]
    ]


def test_many_folds_merge_into_few_segments_and_rank_as_the_whole_conversation_would(api):
    for batch in range(9):  # a fold each: one more than a merge takes
        talk(
            api,
            8,
            prefix=f"b{batch}-",
            start_minutes_ago=600 - 50 * batch,
            first=f"batch {batch} opened with invoice INV-20{batch}1 for the warehouse",
        )
        fold_all(api)
    talk(api, 3, prefix="tail-", start_minutes_ago=20, first="the tail mentions INV-2051 again")
    keys = segment_keys(api)
    assert any(key.startswith("RECALL#1#") for key in keys), keys
    query = "invoice INV-2051 warehouse schedule"

    status, body = recall(api, {"query": query, "limit": 20})

    assert status == 200, body
    expected = rank(query, exported_turns(api), 20)
    assert [(p["turn"]["id"], p["score"]) for p in body["passages"]] == [
        (s.turn.id, s.score) for s in expected
    ]


def test_a_turn_older_than_the_history_range_is_not_found_a_turn_just_inside_is(api):
    # acme keeps 30 days of history.
    api.converse(
        "the old lease of Rue Lepic",
        tenant="acme",
        sent_at=minutes_ago(60 * 24 * 30 + 5),
        message_id="outside",
    )
    api.converse(
        "the lease of Rue Lepic again",
        tenant="acme",
        sent_at=minutes_ago(60 * 24 * 30 - 5),
        message_id="inside",
    )

    status, body = recall(api, {"query": "lease Lepic"}, tenant="acme")

    assert status == 200, body
    assert [p["turn"]["id"] for p in body["passages"]] == ["inside"]


def test_only_the_contacts_own_turns_are_searched(api):
    api.converse("the warehouse code is 4471", tenant="roomy", contact="c1", message_id="mine")
    api.converse("the warehouse code is 9902", tenant="roomy", contact="c2", message_id="theirs")
    api.converse("the warehouse code is 5550", tenant="acme", contact="c1", message_id="other")

    status, body = recall(api, {"query": "warehouse code"}, contact="c1")

    assert status == 200, body
    assert [p["turn"]["id"] for p in body["passages"]] == ["mine"]


def test_no_match_is_200_with_no_passage_and_so_is_a_contact_with_nothing_stored(api):
    api.converse("hello there", tenant="roomy", message_id="m1")

    assert recall(api, {"query": "indemnity"}) == (200, {"passages": []})
    assert recall(api, {"query": "hello"}, contact="nobody") == (200, {"passages": []})


def test_a_recall_records_counts_and_queues_nothing(api):
    talk(api, 30, first=CLAUSE)
    fold_all(api)
    before = api.items()

    for _ in range(3):
        assert recall(api, {"query": "indemnify"})[0] == 200

    assert api.items() == before
    assert api.queued() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": " \u200b\t"}, "query"),
        ({}, "query"),
        ({"query": 7}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": "clause", "limit": 0}, "limit"),
        ({"query": "clause", "limit": 21}, "limit"),
        ({"query": "clause", "limit": "5"}, "limit"),
        ({"query": "clause", "limit": 2.5}, "limit"),
        ({"query": "clause", "extra": 1}, "extra"),
    ],
)
def test_a_bad_request_is_400_naming_the_field_and_reads_nothing(api, body, field):
    api.converse("the clause", tenant="roomy", message_id="m1")
    before = api.items()

    status, answer = recall(api, body)

    assert status == 400, answer
    assert answer["error"]["message"].startswith(field), answer
    assert api.items() == before


@pytest.mark.parametrize("limit", [1, 20])
def test_limits_1_and_20_are_accepted_and_bound_the_passages(api, limit):
    for n in range(25):
        api.converse(
            f"clause {n} of the lease",
            tenant="roomy",
            sent_at=minutes_ago(60 - n),
            message_id=f"m{n}",
        )

    status, body = recall(api, {"query": "clause lease", "limit": limit})

    assert status == 200, body
    assert len(body["passages"]) == limit


def test_an_unknown_tenant_is_404_and_another_tenants_caller_403(api):
    status, body = recall(api, {"query": "clause"}, tenant="nobody")
    assert status == 404, body
    assert "nobody" in body["error"]["message"]
    status, body = recall(api, {"query": "clause"}, tenant="other", caller=AGENT_ROLE)
    assert status == 403, body


def test_a_contact_over_its_rate_limit_is_refused_429_and_a_recall_never_counts(api):
    for _ in range(5):  # recalls before any message take none of the contact's three slots
        assert recall(api, {"query": "x"}, tenant="limited")[0] == 200
    for n in range(3):
        assert api.converse(f"message {n}", tenant="limited", message_id=f"m{n}")[0] == 200

    status, body = recall(api, {"query": "message"}, tenant="limited")

    assert status == 429, body
    assert body["error"]["retryAfterSeconds"] > 0


def test_a_long_turn_comes_back_cut_around_its_match_within_the_message_budget(api):
    filler = " ".join(f"word{n}" for n in range(6000))
    api.converse(
        f"{filler} the governing law is the law of Scotland. {filler}",
        tenant="roomy",
        message_id="long",
    )

    status, body = recall(api, {"query": "governing law Scotland"})

    assert status == 200, body
    text = body["passages"][0]["turn"]["content"][0]["text"]
    assert "the governing law is the law of Scotland." in text
    assert "tokens omitted" in text
    assert len(text) < len(filler)


def test_an_erase_takes_the_index_with_the_turns(api):
    talk(api, 30, first=CLAUSE)
    fold_all(api)
    assert segment_keys(api)

    assert api.request("DELETE", "/v1/tenants/roomy/contacts/c1")[0] == 200

    assert segment_keys(api) == []
    assert recall(api, {"query": "indemnify"}) == (200, {"passages": []})


def test_the_direct_invocation_recalls_as_the_route_does(api):
    talk(api, 30, first=CLAUSE)
    fold_all(api)
    event = {"action": "recall", "tenantId": "roomy", "contactId": "c1", "query": "indemnify"}

    answer = api.handler.lambda_handler(event, CONTEXT)

    assert answer == recall(api, {"query": "indemnify"})[1]
    refused = api.handler.lambda_handler({**event, "limit": 0}, CONTEXT)
    assert refused["statusCode"] == 400
    assert refused["error"]["message"].startswith("limit")


def test_a_turn_deleted_since_it_was_indexed_gives_its_place_to_the_next(api):
    for n in range(6):
        api.converse(
            f"clause {n} of the lease " + "x" * 2000,
            tenant="roomy",
            sent_at=minutes_ago(90 - n),
            message_id=f"m{n}",
        )
    fold_all(api)
    _, before = recall(api, {"query": "clause lease", "limit": 2})
    gone = before["passages"][0]["turn"]["id"]
    [item] = [i for i in api.turn_items() if i.get("turnId", {}).get("S") == gone]
    api.dynamodb.delete_item(TableName=TABLE, Key={"PK": item["PK"], "SK": item["SK"]})

    status, after = recall(api, {"query": "clause lease", "limit": 2})

    assert status == 200, after
    ids = [p["turn"]["id"] for p in after["passages"]]
    assert gone not in ids
    assert len(ids) == 2


def test_a_fold_whose_index_write_fails_stands_and_the_failure_is_reported(api, monkeypatch, logs):
    talk(api, 30, first=CLAUSE)
    compactor = api.compactor()

    def refused(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("throttled")

    monkeypatch.setattr(compactor.STORE, "index_fold", refused)
    answer = compactor.lambda_handler({"Records": api.received()}, CONTEXT)

    assert answer == {"batchItemFailures": []}
    assert api.memory_item(tenant="roomy"), "the fold did not stand"
    assert segment_keys(api) == []
    assert "recall_index_failed" in logs.getvalue()


def test_segments_too_large_for_an_item_are_written_in_parts_and_read_whole(api, monkeypatch):
    index_module = sys.modules["adapters.dynamodb_recall_index"]
    monkeypatch.setattr(index_module, "SEGMENT_MAX_BYTES", 700)
    for batch in range(9):
        talk(
            api,
            8,
            prefix=f"b{batch}-",
            start_minutes_ago=600 - 50 * batch,
            first=f"batch {batch} opened with invoice INV-20{batch}1 for the warehouse",
        )
        fold_all(api)
    keys = segment_keys(api)
    assert any(key.endswith("#001") for key in keys), keys
    query = "invoice warehouse schedule"

    status, body = recall(api, {"query": query, "limit": 20})

    assert status == 200, body
    expected = rank(query, exported_turns(api), 20)
    assert [(p["turn"]["id"], p["score"]) for p in body["passages"]] == [
        (s.turn.id, s.score) for s in expected
    ]


def test_a_merge_without_its_first_part_is_not_read_and_what_it_merged_still_is(api):
    talk(api, 30, first=CLAUSE)
    fold_all(api)
    [level0] = [k for k in segment_keys(api) if k.startswith("RECALL#0#")]
    unfinished = level0.replace("RECALL#0#", "RECALL#1#").replace("#000", "#001")
    api.dynamodb.put_item(
        TableName=TABLE,
        Item={
            "PK": {"S": "TENANT#roomy#CONTACT#c1"},
            "SK": {"S": unfinished},
            "segment": {"B": zlib.compress(b'{"turns":[],"postings":{}}')},
        },
    )

    status, body = recall(api, {"query": "indemnify"})

    assert status == 200, body
    assert body["passages"][0]["turn"]["content"] == [{"text": CLAUSE}]
