"""The Strands Agents adapter: a real `strands.Agent` whose memory is the service.

The agent runs the client's scripted model (`conversation_memory_client.scripted`:
it streams text or tool calls as Bedrock would, and keeps what it was given) and a
real `@tool`; the service is the converse
handler under moto, reached through the client's Lambda transport. Every
history a model call receives is checked as Bedrock Converse would check it
(botocore's input shape, then the rules it enforces beyond the shape).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.agent.conversation_manager import (
    ConversationManager,
    SlidingWindowConversationManager,
)
from strands.types.content import ContentBlock

from conversation_memory_client import MemoryClient
from conversation_memory_client.scripted import (
    ModelCall,
    Say,
    ScriptedModel,
    ScriptExhausted,
    UseTool,
)
from conversation_memory_client.strands import Escalated, ServiceMemory
from local.proxy_events import LambdaContextStandIn
from tests.integration.conftest import RULES, Api
from tests.support.converse_validator import converse_problems
from tests.support.lambda_stand_in import FUNCTION, FakeLambda
from tests.support.strands_tools import look_up

AGENT_PROMPT = "You are Acme's order desk. Answer briefly; look items up before you answer."
AGENT_SYSTEM: list[dict[str, Any]] = [
    {"text": AGENT_PROMPT},
    {"cachePoint": {"type": "default"}},
]
CAP = 6
"""HISTORY_WINDOW_MAX_MESSAGES here: a tool loop of 8 calls is 17 messages past its question."""
LOOP = 8


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    """The suite's rules, and a tenant that escalates at its third message."""
    path = tmp_path / "rules.json"
    path.write_text(
        json.dumps({"tenants": {**RULES["tenants"], "capped": {"maxTurnsPerConversation": 2}}})
    )
    return path


@dataclass
class Service:
    api: Api
    client: MemoryClient


@pytest.fixture
def service(make_api: Callable[..., Api]) -> Service:
    api = make_api(HISTORY_WINDOW_MAX_MESSAGES=str(CAP), HISTORY_WINDOW_FLOOR_MESSAGES="4")
    return Service(api, MemoryClient.over_lambda(FUNCTION, lambda_client=FakeLambda(api.handler)))


# -- a scripted model and a real tool ------------------------------------------------------


def a_tool_loop(n: int = LOOP) -> list[Say | UseTool]:
    return [
        *(UseTool("look_up", {"item": f"item-{i}"}, f"call:{i}") for i in range(n)),
        Say(f"All {n} are in stock."),
    ]


def an_agent(model: ScriptedModel, manager: ConversationManager) -> Agent:
    return Agent(
        model=model,
        system_prompt=json.loads(json.dumps(AGENT_SYSTEM)),
        tools=[look_up],
        conversation_manager=manager,
        callback_handler=None,
    )


def problems_of(call: ModelCall) -> list[str]:
    """Why Bedrock Converse would refuse this request: botocore's validation of the
    Converse input shape, then alternation, tool pairing and cache points."""
    return converse_problems({"system": call.system, "messages": call.messages})


def texts(message: dict[str, Any]) -> list[str]:
    return [block["text"] for block in message["content"] if "text" in block]


# -- the adapter -------------------------------------------------------------------------


def test_a_tool_loop_longer_than_the_window_keeps_every_model_call_valid(service: Service):
    model = ScriptedModel([Say("Hello! How can I help?"), *a_tool_loop(), Say("You're welcome.")])
    memory = ServiceMemory(service.client, tenant_id="acme", contact_id="c-42")
    agent = an_agent(model, memory)

    agent("Hi there")
    agent(f"Are items 0 to {LOOP - 1} in stock?")
    agent("Thanks!")

    assert len(model.calls) == 1 + (LOOP + 1) + 1
    for call in model.calls:
        assert problems_of(call) == []
    # The loop's own calls see the window and every message of the invocation so far.
    loop_calls = model.calls[1 : LOOP + 2]
    question_at = len(loop_calls[0].messages) - 1
    for k, call in enumerate(loop_calls):
        assert texts(call.messages[question_at]) == [f"Are items 0 to {LOOP - 1} in stock?"]
        assert len(call.messages) == question_at + 1 + 2 * k
    # The next invocation's window is bounded: the long exchange is cut to its
    # question, a marker, and its newest messages, and still pairs every call.
    last = model.calls[-1].messages
    assert len(last) <= CAP + 1
    question, marker = texts(last[0])
    assert question == f"Are items 0 to {LOOP - 1} in stock?"
    assert marker.endswith("messages of this exchange omitted …")
    assert texts(last[-1]) == ["Thanks!"]
    assert memory.last is not None
    assert memory.last.window is not None
    assert memory.last.window.dropped > 0

    # Recorded as it happened: 3 questions, 8 calls and their 8 results, 3 replies.
    counters = service.client.memory("acme", "c-42").counters
    assert counters["turnsRecorded"] == 3 + 2 * LOOP + 3
    stored = sorted(service.api.turn_items(), key=lambda item: item["SK"]["S"])
    roles = [item["role"]["S"] for item in stored]
    assert roles[:4] == ["user", "assistant", "user", "assistant"]


def test_the_agents_prompt_comes_first_then_the_memory(service: Service):
    model = ScriptedModel([Say(f"Answer {n}.") for n in range(8)])
    memory = ServiceMemory(service.client, tenant_id="acme", contact_id="c-7")
    agent = an_agent(model, memory)
    for n in range(6):
        agent(f"Question {n}: " + "about the order " * 40)
    requests = service.api.received()
    assert requests, "enough unfolded turns ask for a fold"
    compactor = service.api.compactor()
    folded = compactor.lambda_handler({"Records": requests}, LambdaContextStandIn("compactor"))
    assert folded == {"batchItemFailures": []}

    agent("What did we cover?")

    system = model.calls[-1].system
    assert system[:2] == AGENT_SYSTEM
    assert memory.last is not None
    assert memory.last.memory is not None
    assert system[2]["text"].endswith(memory.last.memory.summary)
    assert system[3] == {"cachePoint": {"type": "default"}}
    assert problems_of(model.calls[-1]) == []
    # Between invocations the agent keeps its own prompt.
    assert agent.system_prompt_content == AGENT_SYSTEM
    assert [c.system for c in model.calls[:6]] == [AGENT_SYSTEM] * 6


def test_replies_tool_calls_and_results_are_recorded_as_strands_made_them(service: Service):
    model = ScriptedModel(a_tool_loop(2))
    agent = an_agent(model, ServiceMemory(service.client, tenant_id="acme", contact_id="c-9"))
    agent("Are items 0 and 1 in stock?")

    later = service.client.converse("acme", "c-9", "and now?")
    history = later.raw["history"]
    assert [m["role"] for m in history] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert history[1]["content"] == [
        {"toolUse": {"toolUseId": "call:0", "name": "look_up", "input": {"item": "item-0"}}}
    ]
    result = history[2]["content"][0]["toolResult"]
    assert (result["toolUseId"], result["status"]) == ("call:0", "success")
    assert result["content"] == [{"text": "item-0: 3 in stock"}]
    assert history[-1]["content"] == [{"text": "All 2 are in stock."}]


def test_an_escalation_stops_the_model_call_and_surfaces_the_reason(service: Service):
    model = ScriptedModel([Say("One."), Say("Two."), Say("never said")])
    agent = an_agent(model, ServiceMemory(service.client, tenant_id="capped", contact_id="c-1"))
    agent("first")
    agent("second")
    held = list(agent.messages)

    with pytest.raises(Escalated) as raised:
        agent("third")

    assert (raised.value.reason, raised.value.turn_count) == ("turn_cap", 3)
    assert len(model.calls) == 2
    assert agent.messages == held
    assert agent.system_prompt_content == AGENT_SYSTEM
    # The message itself is recorded: the person taking over sees it.
    assert service.client.memory("capped", "c-1").counters["turnsRecorded"] == 5


def test_a_message_the_service_cannot_store_is_refused_before_anything_is_recorded(
    service: Service,
):
    model = ScriptedModel([Say("never said")])
    agent = an_agent(model, ServiceMemory(service.client, tenant_id="acme", contact_id="c-3"))
    blocks: list[ContentBlock] = [
        {"text": "What is this?"},
        {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}},
    ]

    with pytest.raises(ValueError, match="not image"):
        agent(blocks)

    assert model.calls == []
    assert service.api.turn_items() == []


def test_the_clients_scripted_model_drives_a_real_agent_with_no_network(
    service: Service, monkeypatch: pytest.MonkeyPatch
):
    """What client/README.md offers for trying an agent without Bedrock: the shipped
    model, a real agent and `ServiceMemory`, with every socket refused."""

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    model = ScriptedModel([UseTool("look_up", {"item": "tea"}), "Tea: 3 in stock."])
    agent = an_agent(model, ServiceMemory(service.client, tenant_id="acme", contact_id="c-5"))

    assert str(agent("Is there any tea?")) == "Tea: 3 in stock.\n"
    with pytest.raises(ScriptExhausted, match="model call 3"):
        agent("And coffee?")

    first, second, _ = model.calls
    assert first.tool_names == ["look_up"]
    assert texts(first.messages[-1]) == ["Is there any tea?"]
    call = second.messages[-2]["content"][0]["toolUse"]
    assert (call["name"], call["input"]) == ("look_up", {"item": "tea"})
    assert call["toolUseId"].startswith("tooluse_")
    result = second.messages[-1]["content"][0]["toolResult"]
    assert result["toolUseId"] == call["toolUseId"]
    assert result["content"] == [{"text": "tea: 3 in stock"}]
    assert [problems_of(c) for c in model.calls] == [[], [], []]
    # Question, tool call, its result and the reply; then the second question.
    assert service.client.memory("acme", "c-5").counters["turnsRecorded"] == 5


# -- Strands' own sliding window on the same loop ------------------------------------------


@pytest.mark.parametrize("per_turn", [True, False], ids=["before-each-model-call", "at-the-end"])
def test_strands_sliding_window_sends_a_history_bedrock_refuses_on_the_same_loop(per_turn: bool):
    """Trimming before each model call breaks the loop itself; trimming at the end of the
    invocation (Strands' default) breaks the next one."""
    model = ScriptedModel([*a_tool_loop(), Say("You're welcome.")])
    agent = an_agent(model, SlidingWindowConversationManager(window_size=CAP, per_turn=per_turn))

    agent(f"Are items 0 to {LOOP - 1} in stock?")
    agent("Thanks!")

    refused = [n for n, call in enumerate(model.calls) if problems_of(call)]
    assert refused, "the sliding window kept every request valid"
    assert refused[0] == (3 if per_turn else LOOP + 1)
    first = model.calls[refused[0]]
    # With no plain user message left to cut at, it cuts at a tool call: the history
    # starts with the assistant, and the question the loop answers is gone.
    assert problems_of(first)[0] == "messages[0]: the conversation must start with a user message"
    assert "toolUse" in first.messages[0]["content"][0]
    assert not any("Are items" in t for m in first.messages for t in texts(m))
