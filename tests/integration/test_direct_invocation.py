"""The Step Functions path: `{"action": ...}` events, the same code and the same JSON."""

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
