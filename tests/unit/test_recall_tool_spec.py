"""Recall in the client: `MemoryClient.recall`, the `recall_conversation` tool spec and its
answer, over stand-ins for the service.

`ScriptedTransport` answers each call from a script and keeps the calls sent,
so the request's shape, the checks made before sending, refusals and retries
are seen without a network; the two real transports are driven by stand-ins
for an HTTP session and a Lambda client, so what they would send is checked
there. The tool spec is checked with botocore's own model of Bedrock's
`Converse`, in a whole tool round: the call, and the result `answer_recall` makes.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

from conversation_memory_client import (
    RECALL_TOOL_NAME,
    InvalidRequest,
    MemoryClient,
    RateLimited,
    RecalledPassage,
    RecalledTurn,
    RecallResult,
    UnknownTenant,
    answer_recall,
    recall_tool_spec,
)
from conversation_memory_client.recall_tool import recall_text
from conversation_memory_client.transports import Answer, Call, TransientFailure
from tests.support.converse_validator import converse_problems

TENANT = "acme-legal"
CONTACT = "c-42"
CLAUSE = (
    "Clause 14.2: The Supplier shall indemnify the Customer against all losses arising "
    "from late delivery, payable within 30 days of a written claim."
)
CLAUSE_TURN: dict[str, Any] = {
    "id": "t-3",
    "role": "user",
    "sentAt": "2026-11-10T09:12:00Z",
    "content": [{"text": f"Here is the clause we agreed:\n{CLAUSE}"}],
}
TOOL_TURN: dict[str, Any] = {
    "id": "t-9",
    "role": "assistant",
    "sentAt": "2026-11-10T09:20:00Z",
    "content": [
        {"text": "Checking the register."},
        {"toolUse": {"toolUseId": "call:1", "name": "look_up", "input": {"clause": "14.2"}}},
    ],
}
FOUND: dict[str, Any] = {
    "passages": [
        {"turn": CLAUSE_TURN, "score": 7.25},
        {"turn": TOOL_TURN, "score": 1.5},
    ]
}


@dataclass
class ScriptedTransport:
    """Answers the script in order (an `Answer`, or a `TransientFailure` to raise); keeps
    every call sent."""

    script: list[Answer | TransientFailure]
    sent: list[Call] = field(default_factory=list)

    def send(self, call: Call) -> Answer:
        self.sent.append(call)
        step = self.script.pop(0)
        if isinstance(step, TransientFailure):
            raise step
        return step


def client_of(*script: Answer | TransientFailure) -> tuple[MemoryClient, ScriptedTransport]:
    transport = ScriptedTransport(list(script))
    return MemoryClient(transport, sleep=lambda _: None, jitter=lambda: 0.5), transport


def refusal(status: int, code: str, message: str) -> Answer:
    return Answer(status, {"error": {"code": code, "message": message}})


def recall_use(arguments: Any, tool_use_id: str = "tooluse_recall_1") -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": RECALL_TOOL_NAME, "input": arguments}}


# -- MemoryClient.recall -----------------------------------------------------------------------


def test_recall_posts_the_query_and_the_limit_and_answers_typed_passages():
    client, transport = client_of(Answer(200, FOUND))

    result = client.recall(TENANT, CONTACT, "clause 14.2 indemnify", limit=3)

    assert transport.sent == [
        Call("recall", TENANT, CONTACT, {"query": "clause 14.2 indemnify", "limit": 3})
    ]
    assert isinstance(result, RecallResult)
    first, second = result.passages
    assert first == RecalledPassage(
        turn=RecalledTurn(
            id="t-3", role="user", sent_at="2026-11-10T09:12:00Z", content=CLAUSE_TURN["content"]
        ),
        score=7.25,
        raw=FOUND["passages"][0],
    )
    assert (second.turn.role, second.turn.content, second.score) == (
        "assistant",
        TOOL_TURN["content"],
        1.5,
    )
    assert result.raw == FOUND


def test_recall_asks_for_5_passages_unless_told_and_nothing_found_is_an_empty_list():
    client, transport = client_of(Answer(200, {"passages": []}))

    assert client.recall(TENANT, CONTACT, "invoice INV-2031").passages == []
    assert transport.sent[0].body == {"query": "invoice INV-2031", "limit": 5}


@pytest.mark.parametrize("limit", [1, 20])
def test_limits_of_1_and_20_are_sent_as_they_are(limit: int):
    client, transport = client_of(Answer(200, {"passages": []}))

    client.recall(TENANT, CONTACT, "clause", limit=limit)

    assert transport.sent[0].body == {"query": "clause", "limit": limit}


@pytest.mark.parametrize(
    ("query", "limit", "named"),
    [
        ("", 5, "query"),
        (" \n\t ", 5, "query"),
        ("clause", 0, "limit"),
        ("clause", 21, "limit"),
        ("clause", -1, "limit"),
        ("clause", True, "limit"),
        ("clause", 2.0, "limit"),
        ("clause", "5", "limit"),
    ],
)
def test_a_blank_query_or_a_limit_out_of_range_is_refused_before_anything_is_sent(
    query: str, limit: Any, named: str
):
    client, transport = client_of()

    with pytest.raises(ValueError, match=named):
        client.recall(TENANT, CONTACT, query, limit=limit)

    assert transport.sent == []


def test_a_recall_that_failed_is_retried_and_a_refusal_is_raised_at_once():
    client, transport = client_of(
        TransientFailure(503, "connection_failed", "reset"),
        Answer(502, {"message": "Internal server error"}),
        Answer(200, FOUND),
        refusal(429, "rate_limited", "over the contact's rate limit"),
        refusal(404, "unknown_tenant", "no tenant 'nobody'"),
    )

    assert len(client.recall(TENANT, CONTACT, "clause 14.2").passages) == 2
    assert len(transport.sent) == 3
    assert len({json.dumps(call.body) for call in transport.sent}) == 1
    with pytest.raises(RateLimited):
        client.recall(TENANT, CONTACT, "clause 14.2")
    with pytest.raises(UnknownTenant):
        client.recall("nobody", CONTACT, "clause 14.2")
    assert len(transport.sent) == 5


# -- the two transports ------------------------------------------------------------------------


@dataclass
class CannedResponse:
    status_code: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordingHttpSession:
    """Stands in for botocore's `URLLib3Session`: keeps each prepared request."""

    responses: list[CannedResponse]
    sent: list[Any] = field(default_factory=list)

    def send(self, request: Any) -> CannedResponse:
        self.sent.append(request)
        return self.responses.pop(0)


@dataclass
class RecordingLambda:
    """Stands in for botocore's Lambda client: keeps each event, answers the payloads."""

    payloads: list[Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, *, FunctionName: str, Payload: bytes) -> dict[str, Any]:
        self.events.append(json.loads(Payload))
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(self.payloads.pop(0)).encode())}


def test_over_http_recall_is_a_signed_json_post_on_the_contacts_recall_route():
    session = botocore.session.Session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    http_session = RecordingHttpSession([CannedResponse(200, json.dumps(FOUND).encode())])
    client = MemoryClient.over_http(
        "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/",
        session=session,
        http_session=http_session,
    )

    client.recall(TENANT, "alice/bob", "clause 14.2", limit=2)

    (sent,) = http_session.sent
    assert (sent.method, sent.url) == (
        "POST",
        "https://abc123.execute-api.eu-west-1.amazonaws.com/prod"
        f"/v1/tenants/{TENANT}/contacts/alice%2Fbob/recall",
    )
    assert json.loads(sent.body) == {"query": "clause 14.2", "limit": 2}
    assert sent.headers["Content-Type"] == "application/json"
    assert "Authorization" in sent.headers


def test_over_lambda_recall_is_the_recall_action_with_the_body_at_the_top_level():
    fake = RecordingLambda(
        [
            FOUND,
            {"error": {"code": "invalid_request", "message": "query: blank"}, "statusCode": 400},
        ]
    )
    client = MemoryClient.over_lambda("converse-history:live", lambda_client=fake)

    assert client.recall(TENANT, CONTACT, "clause 14.2", limit=4).passages[0].score == 7.25
    with pytest.raises(InvalidRequest, match="query"):
        client.recall(TENANT, CONTACT, "\u200b")  # invisible, yet not blank to str.strip

    assert fake.events[0] == {
        "action": "recall",
        "tenantId": TENANT,
        "contactId": CONTACT,
        "query": "clause 14.2",
        "limit": 4,
    }


# -- the tool spec ------------------------------------------------------------------------------


def converse_shape() -> Any:
    client = botocore.session.get_session().create_client(
        "bedrock-runtime", region_name="us-east-1"
    )
    return client.meta.service_model.operation_model("Converse").input_shape


def test_the_spec_names_the_tool_and_asks_for_a_query_and_an_optional_limit_of_1_to_20():
    spec = recall_tool_spec()["toolSpec"]

    assert spec["name"] == "recall_conversation"
    schema = spec["inputSchema"]["json"]
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert {k: schema["properties"]["limit"][k] for k in ("type", "minimum", "maximum")} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
    }


def test_the_description_says_when_to_call_exact_older_words_and_when_not():
    description = recall_tool_spec()["toolSpec"]["description"].lower()

    for when in ("exact words", "earlier in this conversation", "summary", "gist"):
        assert when in description
    for example in ("clause", "figure", "address"):
        assert example in description
    assert "do not call it for anything in the messages you can already see" in description


def test_each_spec_is_a_fresh_copy():
    spec = recall_tool_spec()
    spec["toolSpec"]["inputSchema"]["json"]["required"].append("limit")

    assert recall_tool_spec()["toolSpec"]["inputSchema"]["json"]["required"] == ["query"]


def test_bedrock_converse_takes_the_spec_and_a_whole_recall_round():
    client, _ = client_of(Answer(200, FOUND))
    call = recall_use({"query": "clause 14.2 payment", "limit": 2})
    result = answer_recall(client, TENANT, CONTACT, call)
    request = {
        "modelId": "m",
        "messages": [
            {"role": "user", "content": [{"text": "What does clause 14.2 say about payment?"}]},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ],
        "toolConfig": {"tools": [recall_tool_spec()]},
    }

    validate_parameters(request, converse_shape())  # raises ParamValidationError if not
    assert converse_problems({k: v for k, v in request.items() if k != "modelId"}) == []


# -- answering the model's call ------------------------------------------------------------------


def test_the_answer_holds_each_passages_exact_words_with_who_said_it_and_when():
    client, transport = client_of(Answer(200, FOUND))

    block = answer_recall(client, TENANT, CONTACT, recall_use({"query": "clause 14.2"}))

    result = block["toolResult"]
    assert (result["toolUseId"], result["status"]) == ("tooluse_recall_1", "success")
    (content,) = result["content"]
    text = content["text"]
    assert CLAUSE in text
    assert "[1] user, 2026-11-10T09:12:00Z:\nHere is the clause we agreed:\n" + CLAUSE in text
    assert (
        "[2] assistant, 2026-11-10T09:20:00Z:\nChecking the register.\n"
        '(called look_up with {"clause":"14.2"})'
    ) in text
    assert text.index(CLAUSE) < text.index("Checking the register.")
    assert transport.sent[0].body == {"query": "clause 14.2", "limit": 5}


def test_the_tool_use_value_alone_is_answered_as_the_block_is():
    client, _ = client_of(Answer(200, FOUND), Answer(200, FOUND))

    from_block = answer_recall(client, TENANT, CONTACT, recall_use({"query": "clause"}))
    from_value = answer_recall(client, TENANT, CONTACT, recall_use({"query": "clause"})["toolUse"])

    assert from_block == from_value


def test_nothing_found_is_said_plainly():
    client, _ = client_of(Answer(200, {"passages": []}))

    block = answer_recall(client, TENANT, CONTACT, recall_use({"query": "warranty"}))

    assert block["toolResult"]["status"] == "success"
    assert block["toolResult"]["content"] == [
        {"text": "No earlier message of this conversation matches 'warranty'."}
    ]


def test_a_tool_result_found_is_shown_as_its_contents():
    turn = {
        "id": "t-10",
        "role": "user",
        "sentAt": "2026-11-10T09:21:00Z",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "call:1",
                    "content": [{"text": "14.2: in force"}, {"json": {"amended": False}}],
                }
            }
        ],
    }
    result = RecallResult.from_api({"passages": [{"turn": turn, "score": 2.0}]})

    assert recall_text(result, "14.2").endswith(
        '[1] user, 2026-11-10T09:21:00Z:\n(tool result)\n14.2: in force\n{"amended":false}'
    )


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ({"query": "clause", "limit": 3}, 3),
        ({"query": "clause", "limit": "3"}, 3),
        ({"query": "clause", "limit": 3.0}, 3),
        ({"query": "clause", "limit": None}, 5),
    ],
)
def test_a_limit_a_model_wrote_as_text_or_a_float_is_taken(arguments: dict[str, Any], sent: int):
    client, transport = client_of(Answer(200, {"passages": []}))

    answer_recall(client, TENANT, CONTACT, recall_use(arguments))

    assert transport.sent[0].body == {"query": "clause", "limit": sent}


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 14.2}, "query"),
        ({"query": "clause", "limit": 0}, "limit"),
        ({"query": "clause", "limit": 50}, "limit"),
        ({"query": "clause", "limit": "many"}, "limit"),
        ("clause 14.2", "query"),
    ],
)
def test_a_call_the_model_can_correct_is_answered_with_an_error_naming_the_argument(
    arguments: Any, named: str
):
    client, transport = client_of()

    block = answer_recall(client, TENANT, CONTACT, recall_use(arguments))

    result = block["toolResult"]
    assert result["status"] == "error"
    assert named in result["content"][0]["text"]
    assert transport.sent == []


def test_the_services_refusal_and_its_rate_limit_reach_the_model_as_errors():
    client, _ = client_of(
        refusal(400, "invalid_request", "query: at most 2000 characters"),
        refusal(429, "rate_limited", "over the contact's rate limit"),
    )

    refused = answer_recall(client, TENANT, CONTACT, recall_use({"query": "x" * 2001}))
    limited = answer_recall(client, TENANT, CONTACT, recall_use({"query": "clause"}))

    assert refused["toolResult"]["status"] == "error"
    assert "at most 2000 characters" in refused["toolResult"]["content"][0]["text"]
    assert limited["toolResult"]["status"] == "error"
    assert "answer without it" in limited["toolResult"]["content"][0]["text"]


def test_the_operators_failures_are_raised_not_handed_to_the_model():
    client, _ = client_of(refusal(404, "unknown_tenant", "no tenant 'nobody'"))

    with pytest.raises(UnknownTenant):
        answer_recall(client, "nobody", CONTACT, recall_use({"query": "clause"}))


def test_another_tools_call_is_not_answered():
    client, transport = client_of()
    look_up = {"toolUse": {"toolUseId": "t-1", "name": "look_up", "input": {"item": "tea"}}}

    with pytest.raises(ValueError, match="look_up"):
        answer_recall(client, TENANT, CONTACT, look_up)
    assert transport.sent == []


def test_the_models_own_recall_calls_are_left_out_of_what_it_reads():
    own_call = {
        "id": "t-20",
        "role": "assistant",
        "sentAt": "2026-11-10T10:00:00Z",
        "content": [recall_use({"query": "clause 14.2"})],
    }
    said_and_called = {
        "id": "t-21",
        "role": "assistant",
        "sentAt": "2026-11-10T10:01:00Z",
        "content": [{"text": "Clause 14.2, let me check."}, recall_use({"query": "14.2"})],
    }
    found = RecallResult.from_api(
        {
            "passages": [
                {"turn": own_call, "score": 9.0},
                {"turn": CLAUSE_TURN, "score": 7.25},
                {"turn": said_and_called, "score": 3.0},
            ]
        }
    )
    only_the_call = RecallResult.from_api({"passages": [{"turn": own_call, "score": 9.0}]})

    text = recall_text(found, "clause 14.2")

    assert text.startswith("Found 2 earlier messages")
    assert "\n\n[1] user, 2026-11-10T09:12:00Z:\nHere is the clause" in text
    assert text.endswith("[2] assistant, 2026-11-10T10:01:00Z:\nClause 14.2, let me check.")
    assert RECALL_TOOL_NAME not in text
    assert recall_text(only_the_call, "clause 14.2").startswith("No earlier message")
