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
from typing import Any

import pytest
from strands import Agent, tool
from strands.agent.conversation_manager import (
    ConversationManager,
    SlidingWindowConversationManager,
)
from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
from strands.interrupt import Interrupt
from strands.types.content import ContentBlock
from strands.types.interrupt import InterruptResponseContent

from conversation_memory_client.scripted import (
    ModelCall,
    Say,
    ScriptedModel,
    ScriptExhausted,
    UseTool,
)
from conversation_memory_client.strands import Escalated, ServiceMemory
from local.proxy_events import LambdaContextStandIn
from tests.integration.agent_frameworks import CAP, LOOP, Service, service_for_agents
from tests.integration.conftest import Api
from tests.support.converse_validator import converse_problems
from tests.support.strands_tools import look_up

AGENT_PROMPT = "You are Acme's order desk. Answer briefly; look items up before you answer."
AGENT_SYSTEM: list[dict[str, Any]] = [
    {"text": AGENT_PROMPT},
    {"cachePoint": {"type": "default"}},
]


@pytest.fixture
def service(make_api: Callable[..., Api]) -> Service:
    return service_for_agents(make_api)


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


# -- an interrupt, and a tool that raises ------------------------------------------------


class AskTheClerk(HookProvider):
    """Interrupts before each tool call for a clerk's approval; anything but "approve"
    cancels the call, so Strands answers it with an error result."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        registry.add_callback(BeforeToolCallEvent, self.ask)

    def ask(self, event: BeforeToolCallEvent) -> None:
        self.asked.append(event.tool_use["toolUseId"])
        answer = event.interrupt("clerk", reason={"approve": event.tool_use["name"]})
        if answer != "approve":
            event.cancel_tool = f"The clerk said no: {answer}"


@tool
def reserve(item: str) -> str:
    """Reserve an item in the warehouse.

    Args:
        item: the item's name
    """
    raise RuntimeError(f"the warehouse is offline, {item} not reserved")


def an_agent_with(model: ScriptedModel, memory: ServiceMemory, **options: Any) -> Agent:
    return Agent(
        model=model,
        system_prompt=json.loads(json.dumps(AGENT_SYSTEM)),
        conversation_manager=memory,
        callback_handler=None,
        **options,
    )


def answering(interrupt: Interrupt, response: str) -> list[InterruptResponseContent]:
    return [{"interruptResponse": {"interruptId": interrupt.id, "response": response}}]


def contents(call: ModelCall) -> list[list[dict[str, Any]]]:
    """Each message's blocks, less the cache point the service puts after the history."""
    return [[b for b in m["content"] if "cachePoint" not in b] for m in call.messages]


def recorded(service: Service, contact: str) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(turn.role, turn.content) for turn in service.client.turns("acme", contact)]


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        ("approve", {"status": "success", "content": [{"text": "widget: 3 in stock"}]}),
        (
            "not today",
            {"status": "error", "content": [{"text": "The clerk said no: not today"}]},
        ),
    ],
    ids=["approved", "denied"],
)
def test_an_interrupted_tool_call_resumes_from_the_agents_history_and_is_recorded_once(
    service: Service, answer: str, result: dict[str, Any]
):
    model = ScriptedModel(
        [
            UseTool("look_up", {"item": "widget"}, "call:w"),
            Say("Here is what I found."),
            Say("Anything else?"),
        ]
    )
    clerk = AskTheClerk()
    memory = ServiceMemory(service.client, tenant_id="acme", contact_id="c-11")
    agent = an_agent_with(model, memory, tools=[look_up], hooks=[clerk])

    stopped = agent("Are widgets in stock?")

    assert stopped.stop_reason == "interrupt"
    assert stopped.interrupts is not None
    (interrupt,) = stopped.interrupts
    assert (interrupt.name, interrupt.reason) == ("clerk", {"approve": "look_up"})
    assert len(model.calls) == 1
    question: list[dict[str, Any]] = [{"text": "Are widgets in stock?"}]
    call = [{"toolUse": {"toolUseId": "call:w", "name": "look_up", "input": {"item": "widget"}}}]
    assert recorded(service, "c-11") == [("user", question), ("assistant", call)]
    conversed = memory.last

    resumed = agent(answering(interrupt, answer))

    assert resumed.stop_reason == "end_turn"
    assert str(resumed) == "Here is what I found.\n"
    assert clerk.asked == ["call:w", "call:w"]
    assert memory.last is conversed, "the answer to an interrupt is not a new message"
    # The model goes on from the agent's history: the question, the call, its result.
    on_resume = model.calls[1]
    assert problems_of(on_resume) == []
    assert on_resume.system == model.calls[0].system
    assert on_resume.messages[-3]["content"] == question
    assert on_resume.messages[-2]["content"] == call
    assert on_resume.messages[-1]["content"] == [{"toolResult": {"toolUseId": "call:w", **result}}]
    assert agent.system_prompt_content == AGENT_SYSTEM
    # Each of the four recorded once, as Strands made it.
    stored_result = {"toolResult": {"toolUseId": "call:w", **result}}
    reply = [{"text": "Here is what I found."}]
    assert recorded(service, "c-11") == [
        ("user", question),
        ("assistant", call),
        ("user", [stored_result]),
        ("assistant", reply),
    ]
    assert service.client.memory("acme", "c-11").counters["turnsRecorded"] == 4

    agent("next")

    window = model.calls[-1]
    assert problems_of(window) == []
    assert contents(window) == [
        question,
        call,
        [stored_result],
        reply,
        [{"text": "next"}],
    ]
    assert clerk.asked == ["call:w", "call:w"]
    assert service.client.memory("acme", "c-11").counters["turnsRecorded"] == 6


def test_a_tool_that_raises_is_recorded_as_its_error_result(service: Service):
    model = ScriptedModel(
        [
            UseTool("reserve", {"item": "widget"}, "call:r"),
            Say("Sorry, I could not reserve it."),
            Say("Try again later."),
        ]
    )
    memory = ServiceMemory(service.client, tenant_id="acme", contact_id="c-12")
    agent = an_agent_with(model, memory, tools=[reserve])

    answered = agent("Reserve a widget, please.")

    assert str(answered) == "Sorry, I could not reserve it.\n"
    error = {
        "toolResult": {
            "toolUseId": "call:r",
            "status": "error",
            "content": [
                {"text": "Error: RuntimeError - the warehouse is offline, widget not reserved"}
            ],
        }
    }
    after_the_error = model.calls[1]
    assert problems_of(after_the_error) == []
    assert after_the_error.messages[-1]["content"] == [error]
    question: list[dict[str, Any]] = [{"text": "Reserve a widget, please."}]
    call = [{"toolUse": {"toolUseId": "call:r", "name": "reserve", "input": {"item": "widget"}}}]
    reply = [{"text": "Sorry, I could not reserve it."}]
    assert recorded(service, "c-12") == [
        ("user", question),
        ("assistant", call),
        ("user", [error]),
        ("assistant", reply),
    ]

    agent("Can you try again?")

    window = model.calls[-1]
    assert problems_of(window) == []
    assert contents(window) == [
        question,
        call,
        [error],
        reply,
        [{"text": "Can you try again?"}],
    ]
    assert service.client.memory("acme", "c-12").counters["turnsRecorded"] == 6


def test_a_resumed_invocation_keeps_the_memory_after_the_agents_prompt(service: Service):
    """The answer to an interrupt calls no `converse`: the model still sees the memory the
    interrupted invocation was given, and the agent keeps its own prompt afterwards."""
    model = ScriptedModel(
        [
            *(Say(f"Answer {n}.") for n in range(6)),
            UseTool("look_up", {"item": "widget"}, "call:w"),
            Say("Widgets: 3 in stock."),
        ]
    )
    memory = ServiceMemory(service.client, tenant_id="acme", contact_id="c-13")
    agent = an_agent_with(model, memory, tools=[look_up], hooks=[AskTheClerk()])
    for n in range(6):
        agent(f"Question {n}: " + "about the order " * 40)
    compactor = service.api.compactor()
    folded = compactor.lambda_handler(
        {"Records": service.api.received()}, LambdaContextStandIn("compactor")
    )
    assert folded == {"batchItemFailures": []}

    stopped = agent("Are widgets in stock?")
    assert stopped.interrupts is not None
    (interrupt,) = stopped.interrupts
    assert agent.system_prompt_content == AGENT_SYSTEM
    agent(answering(interrupt, "approve"))

    interrupted, resumed = model.calls[-2:]
    assert memory.last is not None
    assert memory.last.memory is not None
    assert resumed.system[:2] == AGENT_SYSTEM
    assert resumed.system[2]["text"].endswith(memory.last.memory.summary)
    assert resumed.system == interrupted.system
    assert problems_of(resumed) == []
    assert agent.system_prompt_content == AGENT_SYSTEM
