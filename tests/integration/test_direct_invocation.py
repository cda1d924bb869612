"""The Step Functions path: `{"action": ...}` events, the same code and the same JSON."""

from typing import Any

from local.proxy_events import LambdaContextStandIn


def invoke(api, event):
    return api.handler.lambda_handler(event, LambdaContextStandIn())


def test_converse_and_record_by_direct_invocation(api):
    first = invoke(
        api,
        {"action": "converse", "tenantId": "acme", "contactId": "c9", "message": {"text": "hi"}},
    )
    assert (first["decision"], first["turnCount"]) == ("model", 1)
    recorded = invoke(
        api,
        {
            "action": "record",
            "tenantId": "acme",
            "contactId": "c9",
            "role": "assistant",
            "text": "hello!",
        },
    )
    assert recorded["turn"]["role"] == "assistant"
    second = invoke(
        api,
        {"action": "converse", "tenantId": "acme", "contactId": "c9", "message": {"text": "ok"}},
    )
    assert [m["content"][0]["text"] for m in second["history"]] == ["hi", "hello!"]
    # The same JSON as the API's answer: the workflow's own shape is asked for by name.
    assert set(second) == {
        "decision",
        "reason",
        "turnCount",
        "history",
        "current",
        "memory",
        "window",
        "converse",
    }
    _status, over_http = api.request("GET", "/v1/tenants/acme/contacts/c9/memory")
    assert over_http["counters"]["turnsRecorded"] == 3


def test_direct_errors_are_the_same_json_with_a_status(api):
    answer = invoke(api, {"action": "converse", "tenantId": "acme", "contactId": "c9"})
    assert answer["statusCode"] == 400
    assert answer["error"]["message"].startswith("message")
    assert (
        invoke(api, {"action": "dance", "tenantId": "acme", "contactId": "c9"})["statusCode"] == 400
    )
    unknown = invoke(
        api,
        {"action": "converse", "tenantId": "nobody", "contactId": "c9", "message": {"text": "hi"}},
    )
    assert (unknown["statusCode"], unknown["error"]["code"]) == (404, "unknown_tenant")
    bad_id = invoke(
        api,
        {"action": "converse", "tenantId": "acme\n", "contactId": "c9", "message": {"text": "hi"}},
    )
    assert bad_id["error"]["message"].startswith("tenantId")
    assert api.items() == []


def test_a_conversations_data_by_direct_invocation_is_the_apis(api):
    for n in range(3):
        invoke(
            api,
            {
                "action": "converse",
                "tenantId": "acme",
                "contactId": "c9",
                "message": {"text": f"m{n}"},
            },
        )
    page = invoke(api, {"action": "turns", "tenantId": "acme", "contactId": "c9", "limit": 2})
    _, over_http = api.request("GET", "/v1/tenants/acme/contacts/c9/turns?limit=2")
    assert page == over_http
    rest = invoke(
        api,
        {"action": "turns", "tenantId": "acme", "contactId": "c9", "cursor": page["nextCursor"]},
    )
    assert [t["content"][0]["text"] for t in page["turns"] + rest["turns"]] == ["m0", "m1", "m2"]
    assert rest["nextCursor"] is None
    listed = invoke(api, {"action": "contacts", "tenantId": "acme"})
    assert [c["contactId"] for c in listed["contacts"]] == ["c9"]

    erased = invoke(api, {"action": "erase", "tenantId": "acme", "contactId": "c9"})

    assert (erased["statusCode"], erased["erased"]) == (200, {"items": 7, "complete": True})
    gone = invoke(api, {"action": "turns", "tenantId": "acme", "contactId": "c9"})
    assert (gone["statusCode"], gone["error"]["code"]) == (404, "not_found")
    assert invoke(api, {"action": "contacts", "tenantId": "acme"})["contacts"] == []


def test_a_direct_page_request_names_the_field_it_refuses(api):
    invoke(
        api,
        {"action": "converse", "tenantId": "acme", "contactId": "c9", "message": {"text": "hi"}},
    )
    cases: list[tuple[dict[str, Any], str]] = [
        ({"action": "turns", "contactId": "c9", "limit": 0}, "limit"),
        ({"action": "turns", "contactId": "c9", "limit": 501}, "limit"),
        ({"action": "turns", "contactId": "c9", "limit": "10"}, "limit"),
        ({"action": "turns", "contactId": "c9", "limit": True}, "limit"),
        ({"action": "turns", "contactId": "c9", "cursor": "forged"}, "cursor"),
        ({"action": "contacts", "cursor": 7}, "cursor"),
        ({"action": "contacts", "limit": 1, "page": 2}, "page"),
        ({"action": "erase"}, "contactId"),
    ]
    for event, field in cases:
        answer = invoke(api, {"tenantId": "acme", **event})
        assert answer["statusCode"] == 400, event
        assert answer["error"]["message"].startswith(field), (event, answer)
    assert invoke(api, {"action": "contacts", "tenantId": "nobody"})["statusCode"] == 404
