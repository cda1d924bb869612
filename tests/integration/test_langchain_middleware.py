"""The LangChain middleware: a real `create_agent` agent whose memory is the service.

The agents run a scripted chat model (`tests.support.scripted_chat_model`: it calls
real LangChain tools and keeps what it was given), or a real `ChatBedrockConverse`
whose bedrock-runtime client is a botocore `Stubber` (botocore validates each real
request; nothing reaches the network). The service is the converse handler under
moto, reached through the client's Lambda transport. Every model call is checked as
Bedrock Converse would check it: the scripted model's messages through langchain-aws's
own conversion, the stubbed client's requests as sent; then botocore's input shape and
the rules Bedrock enforces beyond it (`converse_problems`).
"""

from __future__ import annotations

import asyncio
import copy
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelResponse,
)
from langchain_aws import ChatBedrockConverse
from langchain_aws.chat_models.bedrock_converse import _messages_to_bedrock
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from conversation_memory_client import MemoryClient
from conversation_memory_client.langchain import Escalated, ServiceMemoryMiddleware
from local.proxy_events import LambdaContextStandIn
from tests.integration.agent_frameworks import CAP, LOOP, service_for_agents
from tests.integration.conftest import Api
from tests.support.converse_validator import converse_problems
from tests.support.langchain_tools import (
    crashing_look_up,
    look_up,
    offline_look_up,
    place_order,
)
from tests.support.scripted_chat_model import (
    CACHE_READ,
    CallTools,
    Say,
    ScriptedChatModel,
    ScriptExhausted,
)

AGENT_PROMPT = "You are Acme's order desk. Answer briefly; look items up before you answer."
CACHE_POINT = {"cachePoint": {"type": "default"}}
MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
QUESTION = f"Are items 0 to {LOOP - 1} in stock?"


@dataclass
class Service:
    api: Api
    client: MemoryClient

    def memory(self, contact: str, tenant: str = "acme") -> ServiceMemoryMiddleware:
        return ServiceMemoryMiddleware(self.client, tenant_id=tenant, contact_id=contact)

    def turns(self, contact: str, tenant: str = "acme") -> list[dict[str, Any]]:
        return [
            {"role": t.role, "content": t.content, "usage": t.usage}
            for t in self.client.turns(tenant, contact)
        ]


@pytest.fixture
def service(make_api: Callable[..., Api]) -> Service:
    shared = service_for_agents(make_api)
    return Service(shared.api, shared.client)


# -- models whose every call is checked as Bedrock would check it -----------------------------

Reply = Say | CallTools


def a_tool_loop(n: int = LOOP) -> list[Reply]:
    return [
        *(CallTools(("look_up", {"item": f"item-{i}"}, f"call_{i}")) for i in range(n)),
        Say(f"All {n} are in stock."),
    ]


def fragment_of(system: SystemMessage | None, messages: list[BaseMessage]) -> dict[str, Any]:
    """What `ChatBedrockConverse` would send for these messages: langchain-aws's own
    conversion to Converse's `messages` and `system`."""
    sent = [m.model_copy(deep=True) for m in ([system] if system else []) + messages]
    converted, system_blocks = _messages_to_bedrock(sent)
    return (
        {"system": system_blocks, "messages": converted}
        if system_blocks
        else {"messages": converted}
    )


class Scripted:
    """Any chat model: the scripted one; its calls as langchain-aws would convert them."""

    def __init__(self, script: list[Reply]) -> None:
        self.model = ScriptedChatModel(script=list(script))

    def fragments(self) -> list[dict[str, Any]]:
        return [fragment_of(call.system, call.messages) for call in self.model.calls]


def bedrock_answer(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Say):
        content: list[dict[str, Any]] = [{"text": reply.text}]
    else:
        content = [
            {"toolUse": {"toolUseId": id_, "name": name, "input": args}}
            for name, args, id_ in reply.calls
        ]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "end_turn" if isinstance(reply, Say) else "tool_use",
        "usage": {
            "inputTokens": 100,
            "outputTokens": 10,
            "totalTokens": 110 + CACHE_READ,
            "cacheReadInputTokens": CACHE_READ,
            "cacheWriteInputTokens": 0,
        },
        "metrics": {"latencyMs": 5},
    }


class Bedrock:
    """A real `ChatBedrockConverse`; its bedrock-runtime client answers from a Stubber, and
    every request it sends is kept as botocore built it (after botocore validated it)."""

    def __init__(self, script: list[Reply]) -> None:
        client = boto3.client("bedrock-runtime", region_name="us-east-1")
        self.stubber = Stubber(client)
        for reply in script:
            self.stubber.add_response("converse", bedrock_answer(reply))
        self.stubber.activate()
        self.sent: list[dict[str, Any]] = []
        client.meta.events.register(
            "provide-client-params.bedrock-runtime.Converse",
            lambda params, **_: self.sent.append(copy.deepcopy(params)),
        )
        self.model = ChatBedrockConverse(
            model_id=MODEL_ID, client=client, region_name="us-east-1", disable_streaming=True
        )

    def fragments(self) -> list[dict[str, Any]]:
        return [
            {key: body[key] for key in ("system", "messages") if body.get(key)}
            for body in self.sent
        ]


Harness = Scripted | Bedrock


@pytest.fixture(params=["any-chat-model", "ChatBedrockConverse"])
def harness(request: pytest.FixtureRequest) -> Callable[[list[Reply]], Harness]:
    return Scripted if request.param == "any-chat-model" else Bedrock


def an_agent(
    model: BaseChatModel,
    memory: AgentMiddleware[Any, Any, Any] | None,
    *,
    tools: list[Any] | None = None,
    system_prompt: str | SystemMessage = AGENT_PROMPT,
    middleware: list[AgentMiddleware[Any, Any, Any]] | None = None,
    **options: Any,
) -> Any:
    return create_agent(
        model,
        tools=tools if tools is not None else [look_up],
        system_prompt=system_prompt,
        middleware=[*([memory] if memory else []), *(middleware or [])],
        **options,
    )


def ask(agent: Any, text: str | list[Any], config: dict[str, Any] | None = None) -> Any:
    return agent.invoke({"messages": [HumanMessage(content=text)]}, config)


def texts(message: dict[str, Any]) -> list[str]:
    return [block["text"] for block in message["content"] if "text" in block]


def cache_points(fragment: dict[str, Any]) -> int:
    blocks = [*fragment.get("system", []), *(b for m in fragment["messages"] for b in m["content"])]
    return sum("cachePoint" in block for block in blocks)


# -- the middleware ----------------------------------------------------------------------------


def test_a_tool_loop_longer_than_the_window_keeps_every_model_call_valid(
    service: Service, harness: Callable[[list[Reply]], Harness]
):
    model = harness([Say("Hello! How can I help?"), *a_tool_loop(), Say("You're welcome.")])
    memory = service.memory("c-42")
    agent = an_agent(model.model, memory)

    ask(agent, "Hi there")
    ask(agent, QUESTION)
    ask(agent, "Thanks!")

    calls = model.fragments()
    assert len(calls) == 1 + (LOOP + 1) + 1
    for call in calls:
        assert converse_problems(call) == []
    # The loop's own calls see the window and every message of the run so far.
    loop_calls = calls[1 : LOOP + 2]
    question_at = len(loop_calls[0]["messages"]) - 1
    for k, call in enumerate(loop_calls):
        assert texts(call["messages"][question_at]) == [QUESTION]
        assert len(call["messages"]) == question_at + 1 + 2 * k
    # The next run's window is bounded: the long exchange is cut to its question, a
    # marker and its newest messages, and still pairs every call.
    last = calls[-1]["messages"]
    assert len(last) <= CAP + 1
    question, marker = texts(last[0])
    assert question == QUESTION
    assert marker.endswith("messages of this exchange omitted …")
    assert texts(last[-1]) == ["Thanks!"]
    assert memory.last is not None
    assert memory.last.window is not None
    assert memory.last.window.dropped > 0
    # The service's cache points reach Bedrock, and no other model.
    if isinstance(model, Bedrock):
        assert cache_points(calls[-1]) >= 1
    else:
        sent = [m.content for c in model.model.calls for m in c.messages]
        assert not any("cachePoint" in str(content) for content in sent)

    # Recorded as it happened: 3 questions, 8 calls and their 8 results, 3 replies.
    counters = service.client.memory("acme", "c-42").counters
    assert counters["turnsRecorded"] == 3 + 2 * LOOP + 3


def test_the_agents_prompt_comes_first_then_the_memory(
    service: Service, harness: Callable[[list[Reply]], Harness]
):
    model = harness([Say(f"Answer {n}.") for n in range(7)])
    bedrock = isinstance(model, Bedrock)
    prompt: str | SystemMessage = (
        SystemMessage(content=[{"type": "text", "text": AGENT_PROMPT}, CACHE_POINT])
        if bedrock
        else AGENT_PROMPT
    )
    memory = service.memory("c-7")
    agent = an_agent(model.model, memory, system_prompt=prompt)
    for n in range(6):
        ask(agent, f"Question {n}: " + "about the order " * 40)
    requests = service.api.received()
    assert requests, "enough unfolded turns ask for a fold"
    compactor = service.api.compactor()
    folded = compactor.lambda_handler({"Records": requests}, LambdaContextStandIn("compactor"))
    assert folded == {"batchItemFailures": []}

    ask(agent, "What did we cover?")

    assert memory.last is not None
    assert memory.last.memory is not None
    summary = memory.last.memory.summary
    last = model.fragments()[-1]
    assert converse_problems(last) == []
    if bedrock:
        # As Bedrock received it: the agent's prompt and its cache point, then the
        # memory and the service's cache point after it.
        assert last["system"][:2] == [{"text": AGENT_PROMPT}, CACHE_POINT]
        assert last["system"][2]["text"].endswith(summary)
        assert last["system"][3] == CACHE_POINT
        assert len(last["system"]) == 4
    else:
        assert isinstance(model, Scripted)
        system = model.model.calls[-1].system
        assert system is not None
        assert system.content[0] == {"type": "text", "text": AGENT_PROMPT}
        assert system.content[1]["text"].endswith(summary)  # type: ignore[index]
        assert len(system.content) == 2  # the service's cache point left out
        assert [c.system.content for c in model.model.calls[:6] if c.system] == [AGENT_PROMPT] * 6


def expected_turns(question: str, run: list[BaseMessage]) -> list[dict[str, Any]]:
    """The turns a run should leave: its question, then each reply and each round of
    tool results as LangChain produced them (usage as Bedrock counts it)."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": [{"text": question}], "usage": None}]
    for message in run:
        if isinstance(message, AIMessage):
            usage = message.usage_metadata
            assert usage is not None
            content: list[dict[str, Any]] = [{"text": message.text}] if message.text else []
            content += [
                {"toolUse": {"toolUseId": c["id"], "name": c["name"], "input": c["args"]}}
                for c in message.tool_calls
            ]
            read = usage["input_token_details"]["cache_read"]
            turns.append(
                {
                    "role": "assistant",
                    "content": content,
                    "usage": {
                        "inputTokens": usage["input_tokens"] - read,
                        "outputTokens": usage["output_tokens"],
                        "totalTokens": usage["total_tokens"],
                        "cacheReadInputTokens": read,
                        "cacheWriteInputTokens": 0,
                    },
                }
            )
        elif isinstance(message, ToolMessage):
            result = {
                "toolResult": {
                    "toolUseId": message.tool_call_id,
                    "content": [{"text": message.content}],
                    "status": message.status,
                }
            }
            if turns[-1]["role"] == "user":
                turns[-1]["content"].append(result)
            else:
                turns.append({"role": "user", "content": [result], "usage": None})
    return turns


def test_replies_tool_calls_and_results_are_recorded_as_langchain_made_them(service: Service):
    model = ScriptedChatModel(
        script=[
            CallTools(("look_up", {"item": "tea"}, "call_tea")),
            CallTools(("offline_look_up", {"item": "coffee"}, "call_coffee")),
            Say("Tea: 3 in stock; coffee unknown."),
        ]
    )
    agent = an_agent(model, service.memory("c-9"), tools=[look_up, offline_look_up])

    result = ask(agent, "Tea and coffee?")

    run = result["messages"][1:]
    assert [type(m).__name__ for m in run] == [
        "AIMessage",
        "ToolMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    stored = service.turns("c-9")
    assert stored == expected_turns("Tea and coffee?", run)
    # Spelled out once: the tool error as LangChain reported it, and the usage.
    assert stored[4]["content"][0]["toolResult"]["status"] == "error"
    assert "warehouse offline" in stored[4]["content"][0]["toolResult"]["content"][0]["text"]
    assert stored[1]["usage"] == {
        "inputTokens": 100,
        "outputTokens": 11,
        "totalTokens": 151,
        "cacheReadInputTokens": CACHE_READ,
        "cacheWriteInputTokens": 0,
    }
    # The next call after the error is valid too.
    assert converse_problems(fragment_of(model.calls[2].system, model.calls[2].messages)) == []


def test_a_run_that_ends_on_its_tool_results_records_them(service: Service):
    """A `return_direct` tool ends the run after its result: no model call follows to
    record it before, so the end of the run does."""
    model = ScriptedChatModel(script=[CallTools(("place_order", {"item": "tea"}, "call_order"))])
    agent = an_agent(model, service.memory("c-11"), tools=[place_order])

    result = ask(agent, "Order tea, please.")

    assert result["messages"][-1].content == "ordered tea"
    stored = service.turns("c-11")
    assert [t["role"] for t in stored] == ["user", "assistant", "user"]
    assert stored[2]["content"] == [
        {
            "toolResult": {
                "toolUseId": "call_order",
                "content": [{"text": "ordered tea"}],
                "status": "success",
            }
        }
    ]


def test_an_escalation_stops_the_model_call_and_surfaces_the_reason(service: Service):
    model = ScriptedChatModel(script=[Say("One."), Say("Two."), Say("never said")])
    agent = an_agent(model, service.memory("c-1", tenant="capped"))
    ask(agent, "first")
    ask(agent, "second")

    with pytest.raises(Escalated) as raised:
        ask(agent, "third")

    assert (raised.value.reason, raised.value.turn_count) == ("turn_cap", 3)
    assert len(model.calls) == 2
    # The message itself is recorded: the person taking over sees it.
    assert service.client.memory("capped", "c-1").counters["turnsRecorded"] == 5
    assert service.turns("c-1", tenant="capped")[-1]["content"] == [{"text": "third"}]


def test_a_message_the_service_cannot_store_is_refused_before_anything_is_recorded(
    service: Service,
):
    model = ScriptedChatModel(script=[Say("never said")])
    agent = an_agent(model, service.memory("c-3"))
    blocks = [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
    ]

    with pytest.raises(ValueError, match="not image"):
        ask(agent, blocks)

    assert model.calls == []
    assert service.api.turn_items() == []


def test_parallel_tool_calls_are_one_turn_and_their_results_another(service: Service):
    model = ScriptedChatModel(
        script=[
            CallTools(
                ("look_up", {"item": "tea"}, "call_tea"),
                ("look_up", {"item": "coffee"}, "call_coffee"),
            ),
            Say("Both in stock."),
            Say("Yes."),
        ]
    )
    agent = an_agent(model, service.memory("c-12"))

    ask(agent, "Tea and coffee?")
    ask(agent, "Sure?")

    stored = service.turns("c-12")
    assert [t["role"] for t in stored] == ["user", "assistant"] * 3
    assert [b["toolUse"]["toolUseId"] for b in stored[1]["content"]] == ["call_tea", "call_coffee"]
    assert [b["toolResult"]["toolUseId"] for b in stored[2]["content"]] == [
        "call_tea",
        "call_coffee",
    ]
    # The next run's window pairs them, as Bedrock wants: both calls in one message,
    # both results in the next.
    window = fragment_of(model.calls[-1].system, model.calls[-1].messages)
    assert converse_problems(window) == []
    assert [len(m["content"]) for m in window["messages"][1:3]] == [2, 2]
    assert all(converse_problems(fragment_of(c.system, c.messages)) == [] for c in model.calls)


@pytest.mark.parametrize("process", ["same", "another"])
def test_a_run_interrupted_for_approval_resumes_and_records_each_turn_once(
    service: Service, process: str
):
    """Human-in-the-loop: the run stops before the tool, its state in a checkpointer; the
    answer resumes it, here or in another process (a new middleware and model)."""
    checkpointer = InMemorySaver()
    config: dict[str, Any] = {"configurable": {"thread_id": "thread-1"}}

    def build(script: list[Reply]) -> tuple[ScriptedChatModel, Any]:
        model = ScriptedChatModel(script=script)
        approval = HumanInTheLoopMiddleware(interrupt_on={"look_up": True})
        agent = an_agent(
            model, service.memory("c-13"), middleware=[approval], checkpointer=checkpointer
        )
        return model, agent

    first_model, agent = build([CallTools(("look_up", {"item": "tea"}, "call_tea"))])
    interrupted = ask(agent, "Any tea?", config)
    assert "__interrupt__" in interrupted
    assert len(first_model.calls) == 1
    assert [t["role"] for t in service.turns("c-13")] == ["user", "assistant"]

    if process == "another":
        model, agent = build([Say("Tea: 3 in stock."), Say("Bye.")])
    else:
        model = first_model
        model.script.extend([Say("Tea: 3 in stock."), Say("Bye.")])
    resumed = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)

    assert resumed["messages"][-1].text == "Tea: 3 in stock."
    answered = model.calls[-1]
    assert isinstance(answered.messages[-1], ToolMessage)
    assert answered.messages[-1].content == "tea: 3 in stock"
    assert converse_problems(fragment_of(answered.system, answered.messages)) == []
    stored = service.turns("c-13")
    assert [t["role"] for t in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[2]["content"][0]["toolResult"]["toolUseId"] == "call_tea"

    # The thread goes on: the next message starts from the service's window.
    ask(agent, "Thanks!", config)
    last = model.calls[-1]
    assert converse_problems(fragment_of(last.system, last.messages)) == []
    assert [t["role"] for t in service.turns("c-13")] == ["user", "assistant"] * 3
    assert texts(fragment_of(last.system, last.messages)["messages"][0]) == ["Any tea?"]


def test_a_model_call_retried_from_its_checkpoint_records_nothing_twice(service: Service):
    """The model fails after the tool round was recorded; the thread is retried from its
    checkpoint (`invoke(None)` runs the failed step again): the round's turn id is the
    same, so the service replays it instead of storing it twice."""
    model = ScriptedChatModel(script=[CallTools(("look_up", {"item": "tea"}, "call_tea"))])
    agent = an_agent(model, service.memory("c-16"), checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": "thread-16"}}

    with pytest.raises(ScriptExhausted):
        ask(agent, "Any tea?", config)
    assert [t["role"] for t in service.turns("c-16")] == ["user", "assistant", "user"]

    model.script.append(Say("Tea: 3 in stock."))
    result = agent.invoke(None, config)

    assert result["messages"][-1].text == "Tea: 3 in stock."
    assert len(model.calls) == 3
    assert [t["role"] for t in service.turns("c-16")] == ["user", "assistant", "user", "assistant"]


def test_a_tool_that_raises_leaves_a_window_the_next_run_can_send(service: Service):
    """create_agent lets a tool's exception out of the run (its default handles only
    invalid calls): the call is recorded and its result never is; the service repairs
    the missing result in the next window."""
    model = ScriptedChatModel(
        script=[CallTools(("crashing_look_up", {"item": "tea"}, "call_tea")), Say("Hello again.")]
    )
    memory = service.memory("c-14")
    agent = an_agent(model, memory, tools=[crashing_look_up])

    with pytest.raises(RuntimeError, match="connection reset"):
        ask(agent, "Any tea?")
    assert [t["role"] for t in service.turns("c-14")] == ["user", "assistant"]

    ask(agent, "Hello?")

    last = fragment_of(model.calls[-1].system, model.calls[-1].messages)
    assert converse_problems(last) == []
    assert memory.last is not None
    assert memory.last.window is not None
    assert memory.last.window.repaired >= 1
    assert "toolResult" in last["messages"][-1]["content"][0]


def test_langchains_own_trimming_sends_a_history_bedrock_refuses_on_the_same_loop():
    """`trim_messages` to the last N messages before each model call, with a checkpointer
    holding the thread: it cuts the tool loop between a call and its result."""

    class LastMessages(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(
            self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
        ) -> ModelResponse[Any]:
            kept: list[AnyMessage] = trim_messages(  # type: ignore[assignment]
                request.messages, strategy="last", max_tokens=CAP, token_counter=len
            )
            return handler(request.override(messages=kept))  # type: ignore[no-any-return]

    model = ScriptedChatModel(script=[*a_tool_loop(), Say("You're welcome.")])
    agent = an_agent(model, None, middleware=[LastMessages()], checkpointer=InMemorySaver())
    config: dict[str, Any] = {"configurable": {"thread_id": "t"}}
    ask(agent, QUESTION, config)
    ask(agent, "Thanks!", config)

    problems = [converse_problems(fragment_of(c.system, c.messages)) for c in model.calls]
    refused = [n for n, found in enumerate(problems) if found]
    assert refused, "the trimming kept every request valid"
    assert refused[0] == 3
    # Cut at a tool call: the history starts with the assistant, and the question the
    # loop answers is gone.
    first = fragment_of(model.calls[3].system, model.calls[3].messages)
    assert problems[3] == ["messages[0]: the conversation must start with a user message"]
    assert "toolUse" in first["messages"][0]["content"][0]
    assert not any(QUESTION in t for m in first["messages"] for t in texts(m))


def test_an_async_run_records_and_sends_the_same(service: Service, monkeypatch: pytest.MonkeyPatch):
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    model = ScriptedChatModel(script=a_tool_loop(2))
    agent = an_agent(model, service.memory("c-15"))

    result = asyncio.run(
        agent.ainvoke({"messages": [HumanMessage(content="Are items 0 and 1 in stock?")]})
    )

    assert result["messages"][-1].text == "All 2 are in stock."
    assert len(model.calls) == 3
    assert all(converse_problems(fragment_of(c.system, c.messages)) == [] for c in model.calls)
    assert service.turns("c-15") == expected_turns(
        "Are items 0 and 1 in stock?", result["messages"][1:]
    )
