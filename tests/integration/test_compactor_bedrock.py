"""The Bedrock summariser through the compactor, with botocore's Stubber (no network)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import ANY, Stubber

from adapters.summariser import SYSTEM_PROMPT
from local.proxy_events import LambdaContextStandIn
from memory_core.settings import InvalidSettings
from tests.integration.conftest import minutes_ago, request_record

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
CONTEXT = LambdaContextStandIn(function_name="compactor-local")


@pytest.fixture
def conversation(api):
    start = minutes_ago(60)
    for n in range(6):
        at = start + timedelta(minutes=2 * n)
        api.converse(f"Is the fee for matter {n} still 1,200 EUR?", tenant="roomy", sent_at=at)
        api.reply(
            f"Yes, due 15 March for matter {n}.", tenant="roomy", sent_at=at + timedelta(minutes=1)
        )
    return api


@pytest.fixture
def bedrock(conversation):
    compactor = conversation.compactor(SUMMARISER="bedrock", BEDROCK_MODEL_ID=MODEL)
    client = compactor.COMPACTOR._summariser._client
    with Stubber(client) as stub:
        yield compactor, stub


def answer(text: str, stop: str = "end_turn") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": stop,
        "usage": {"inputTokens": 321, "outputTokens": 45, "totalTokens": 366},
        "metrics": {"latencyMs": 900},
    }


def fold(compactor):
    return compactor.lambda_handler({"Records": [request_record("roomy", "c1")]}, CONTEXT)


def test_the_request_names_the_model_the_prompt_and_the_cap_and_the_summary_is_stored(
    conversation, bedrock
):
    compactor, stub = bedrock
    expected = {
        "modelId": MODEL,
        "system": [{"text": SYSTEM_PROMPT}],
        "messages": [{"role": "user", "content": [{"text": ANY}]}],
        "inferenceConfig": {"maxTokens": 800, "temperature": 0.0},
    }
    stub.add_response("converse", answer("Fees of 1,200 EUR per matter, due 15 March."), expected)
    assert fold(compactor) == {"batchItemFailures": []}
    stub.assert_no_pending_responses()
    memory = conversation.memory_item("roomy")
    assert memory["foldSummary"]["S"] == "Fees of 1,200 EUR per matter, due 15 March."
    assert memory["turnsFolded"]["N"] == "12"


def test_the_prompt_carries_the_previous_summary_and_only_the_new_turns(conversation, bedrock):
    compactor, stub = bedrock
    stub.add_response("converse", answer("First summary."))
    fold(compactor)
    conversation.converse("And matter 9?", tenant="roomy")
    captured = []
    client = compactor.COMPACTOR._summariser._client
    client.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse",
        lambda params, **_: captured.append(params["messages"][0]["content"][0]["text"]),
    )
    stub.add_response("converse", answer("Second summary."))
    fold(compactor)
    (prompt,) = captured
    assert "First summary." in prompt
    assert "And matter 9?" in prompt
    assert "matter 0" not in prompt


@pytest.mark.parametrize(
    ("code", "status"),
    [("ThrottlingException", 429), ("ValidationException", 400), ("ModelTimeoutException", 408)],
)
def test_a_bedrock_error_fails_the_record_and_writes_no_summary(
    conversation, bedrock, code, status
):
    compactor, stub = bedrock
    before = conversation.items()
    stub.add_client_error("converse", service_error_code=code, http_status_code=status)
    assert fold(compactor) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    # Only the claim was written (it makes a turn recorded below it late, to be folded by
    # the retry); the turns, the counters and the fold are as they were.
    claim = conversation.state("roomy").pop("foldingThrough")
    newest_turn = max(i["SK"]["S"] for i in before if i["SK"]["S"].startswith("TURN#2"))
    assert claim == {"S": newest_turn}
    after = conversation.items()
    for item in after:
        item.pop("foldingThrough", None)
    assert after == before
    assert "foldSummary" not in conversation.state("roomy")


@pytest.mark.parametrize(
    "response",
    [answer(""), answer("   "), answer("I cannot help with that.", stop="content_filtered")],
)
def test_an_empty_or_refused_answer_never_becomes_the_memory(conversation, bedrock, response):
    compactor, stub = bedrock
    stub.add_response("converse", response)
    assert fold(compactor)["batchItemFailures"] == [{"itemIdentifier": "m-1"}]
    assert "foldSummary" not in conversation.state("roomy")


def test_a_failed_record_comes_back_and_folds_on_the_retry(conversation, bedrock):
    compactor, stub = bedrock
    stub.add_client_error("converse", service_error_code="ThrottlingException")
    stub.add_response("converse", answer("Folded on the second try."))
    assert fold(compactor)["batchItemFailures"]
    assert fold(compactor) == {"batchItemFailures": []}
    assert conversation.memory_item("roomy")["foldSummary"]["S"] == "Folded on the second try."


def test_the_bedrock_summariser_needs_a_model_id(conversation):
    with pytest.raises(InvalidSettings, match="BEDROCK_MODEL_ID"):
        conversation.compactor(SUMMARISER="bedrock")
