"""Recall as the model's tool: a clause pasted early in a conversation, long out of the window
(and folded), asked for again in its exact words.

Each agent runs a scripted model against the converse handler under moto (the
window capped at `CAP` messages, the compactor run on what the converse calls
queued), reached through the client: a plain Bedrock Converse loop with
`recall_tool_spec()` and `answer_recall` (bedrock-runtime answering from a
botocore Stubber, so botocore validates every request), a Strands agent with
`ServiceMemory(recall=True)`, and a LangChain agent with
`ServiceMemoryMiddleware(recall=True)`. In each, the model asks
`recall_conversation` for the clause and the next model call must hold its
exact words; the agent's workflow is otherwise unchanged (one converse a
message, every reply, tool call and tool result recorded).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.stub import Stubber
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_aws import ChatBedrockConverse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from strands import Agent, tool

from conversation_memory_client import (
    RECALL_TOOL_NAME,
    MemoryClient,
    UnknownTenant,
    answer_recall,
    recall_tool_spec,
)
from conversation_memory_client.langchain import ServiceMemoryMiddleware
from conversation_memory_client.scripted import ModelCall, Say, ScriptedModel, UseTool
from conversation_memory_client.strands import ServiceMemory
from local.proxy_events import LambdaContextStandIn, invoke, proxy_event
from tests.integration.agent_frameworks import CAP, Service, service_for_agents
from tests.integration.conftest import Api
from tests.support import scripted_chat_model as chat
from tests.support import strands_tools
from tests.support.converse_validator import converse_problems
from tests.support.langchain_tools import look_up

TENANT = "acme"
MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
CLAUSE = (
    "Clause 14.2: The Supplier shall indemnify the Customer against all losses arising "
    "from late delivery, and shall pay any sum claimed within 30 days of a written claim."
)
PASTED = f"Please keep this clause of the supply contract in mind.\n{CLAUSE}"
LATER = [
    f"Question {n}: when does shipment {n} leave the warehouse? "
    + "We need it for the delivery schedule of the spring season. " * 6
    for n in range(6)
]
ASKED = "What exactly does clause 14.2 say about when the Supplier must pay?"
QUERY = "clause 14.2 indemnify pay days"


@pytest.fixture
def service(make_api: Callable[..., Api]) -> Service:
    return service_for_agents(make_api)


def fold_everything_queued(api: Api) -> int:
    """The compactor run on every compaction request the converse calls queued; the folds."""
    compactor = api.compactor()
    folds = 0
    while requests := api.received():
        answer = compactor.lambda_handler({"Records": requests}, LambdaContextStandIn("compactor"))
        assert answer == {"batchItemFailures": []}
        folds += len(requests)
    return folds


def holds_the_clause(value: Any) -> bool:
    return CLAUSE in json.dumps(value, ensure_ascii=False)


def recorded(service: Service, contact: str) -> list[dict[str, Any]]:
    return [{"role": t.role, "content": t.content} for t in service.client.turns(TENANT, contact)]


def recall_calls_and_results(turns: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    blocks = [block for turn in turns for block in turn["content"]]
    calls = [b["toolUse"] for b in blocks if b.get("toolUse", {}).get("name") == RECALL_TOOL_NAME]
    ids = {call["toolUseId"] for call in calls}
    results = [b["toolResult"] for b in blocks if b.get("toolResult", {}).get("toolUseId") in ids]
    return calls, results


# -- the client itself, over both transports ---------------------------------------------------


@dataclass
class GatewayResponse:
    status_code: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class InProcessGateway:
    """Stands in for botocore's HTTP session: each request the client sends goes to the
    handler as API Gateway's event, and the handler's answer comes back as the response."""

    api: Api

    def send(self, request: Any) -> GatewayResponse:
        url = urlsplit(request.url)
        target = f"{url.path}?{url.query}" if url.query else url.path
        status, headers, body = invoke(
            self.api.handler.lambda_handler,
            proxy_event(request.method, target, request.body, dict(request.headers)),
        )
        content = json.dumps(body).encode() if body is not None else b""
        return GatewayResponse(status, content, headers)


@pytest.fixture(params=["lambda", "http"])
def client(request: pytest.FixtureRequest, service: Service) -> MemoryClient:
    if request.param == "lambda":
        return service.client
    return MemoryClient.over_http(
        "http://127.0.0.1:8000", sign=False, http_session=InProcessGateway(service.api)
    )


def test_recall_finds_a_folded_clause_in_its_exact_words(service: Service, client: MemoryClient):
    service.client.converse(TENANT, "c-client", PASTED)
    service.client.record(TENANT, "c-client", role="assistant", text="Noted.")
    for n, question in enumerate(LATER):
        service.client.converse(TENANT, "c-client", question)
        service.client.record(TENANT, "c-client", role="assistant", text=f"Answer {n}.")
    assert fold_everything_queued(service.api) > 0
    window = service.client.preview(TENANT, "c-client")
    assert not holds_the_clause(window.history), "the clause is still in the window"

    found = client.recall(TENANT, "c-client", QUERY, limit=3)

    best = found.passages[0]
    assert best.turn.role == "user"
    assert best.turn.content == [{"text": PASTED}]
    assert best.score > 0
    assert len(found.passages) <= 3
    assert client.recall(TENANT, "c-client", "zeppelin hovercraft").passages == []
    # Asking recorded nothing.
    assert service.client.memory(TENANT, "c-client").counters["turnsRecorded"] == 14


def test_over_the_rate_limit_the_model_is_told_to_answer_without_recall(service: Service):
    for n in range(3):  # the tenant `limited` takes 3 messages a minute
        service.client.converse("limited", "c-busy", f"Message {n} about clause 14.2.")
    call = {"toolUse": {"toolUseId": "t-1", "name": RECALL_TOOL_NAME, "input": {"query": "14.2"}}}

    block = answer_recall(service.client, "limited", "c-busy", call)

    assert block["toolResult"]["status"] == "error"
    assert "answer without it" in block["toolResult"]["content"][0]["text"]
    with pytest.raises(UnknownTenant):
        answer_recall(service.client, "nobody", "c-busy", call)


# -- a plain Bedrock Converse loop ------------------------------------------------------------


def converse_answer(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110},
        "metrics": {"latencyMs": 5},
    }


class StubbedBedrock:
    """bedrock-runtime answering scripted replies from a Stubber; each request is kept as
    the loop sent it, after botocore validated it against Converse's input shape."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.client = boto3.client("bedrock-runtime", region_name="us-east-1")
        self.stubber = Stubber(self.client)
        for reply in replies:
            self.stubber.add_response("converse", reply)
        self.stubber.activate()
        self.sent: list[dict[str, Any]] = []
        self.client.meta.events.register(
            "provide-client-params.bedrock-runtime.Converse",
            lambda params, **_: self.sent.append(copy.deepcopy(params)),
        )


def converse_loop(
    memory: MemoryClient, bedrock: StubbedBedrock, contact: str, text: str
) -> Iterator[dict[str, Any]]:
    """One message of an agent that calls Bedrock itself: converse once, then the model,
    answering its recall calls, until it answers; yields each reply's message."""
    result = memory.converse(TENANT, contact, text)
    assert not result.escalated
    assert result.converse is not None
    fragment = result.converse
    messages = fragment["messages"]
    while True:
        reply = bedrock.client.converse(
            modelId=MODEL_ID,
            system=fragment["system"],
            messages=messages,
            toolConfig={"tools": [recall_tool_spec()]},
        )
        message = reply["output"]["message"]
        memory.record(
            TENANT, contact, role="assistant", content=message["content"], usage=reply["usage"]
        )
        yield message
        messages.append(message)
        calls = [block for block in message["content"] if "toolUse" in block]
        if not calls:
            return
        results = [answer_recall(memory, TENANT, contact, block) for block in calls]
        memory.record(TENANT, contact, role="user", content=results)
        messages.append({"role": "user", "content": results})


def test_a_plain_converse_loop_recalls_the_clause_through_the_tool_spec(service: Service):
    contact = "c-loop"
    recall_call = {
        "toolUse": {
            "toolUseId": "tooluse_r1",
            "name": RECALL_TOOL_NAME,
            "input": {"query": QUERY, "limit": 3},
        }
    }
    bedrock = StubbedBedrock(
        [
            converse_answer([{"text": "Noted."}], "end_turn"),
            *(converse_answer([{"text": f"Answer {n}."}], "end_turn") for n in range(len(LATER))),
            converse_answer([{"text": "Let me look that up."}, recall_call], "tool_use"),
            converse_answer([{"text": "Within 30 days of a written claim."}], "end_turn"),
        ]
    )
    for text in [PASTED, *LATER]:
        list(converse_loop(service.client, bedrock, contact, text))
    assert fold_everything_queued(service.api) > 0

    replies = list(converse_loop(service.client, bedrock, contact, ASKED))

    assert len(replies) == 2
    asking, answered = bedrock.sent[-2:]
    assert not holds_the_clause(asking["messages"]), "the clause is still in the window"
    result = answered["messages"][-1]["content"][0]["toolResult"]
    assert (result["toolUseId"], result["status"]) == ("tooluse_r1", "success")
    assert CLAUSE in result["content"][0]["text"]
    bedrock.stubber.assert_no_pending_responses()
    for sent in bedrock.sent:
        assert converse_problems({k: v for k, v in sent.items() if k != "modelId"}) == []
    # The loop's recall round is recorded like any tool round.
    calls, results = recall_calls_and_results(recorded(service, contact))
    assert [call["input"] for call in calls] == [{"query": QUERY, "limit": 3}]
    assert CLAUSE in results[0]["content"][0]["text"]


# -- Strands ---------------------------------------------------------------------------------


def a_strands_agent(model: ScriptedModel, memory: ServiceMemory) -> Agent:
    return Agent(
        model=model,
        system_prompt="You are Acme's contracts desk. Quote the contract exactly.",
        tools=[strands_tools.look_up],
        conversation_manager=memory,
        callback_handler=None,
    )


def strands_problems(call: ModelCall) -> list[str]:
    return converse_problems({"system": call.system, "messages": call.messages})


def test_a_strands_agent_recalls_a_clause_the_window_no_longer_holds(service: Service):
    model = ScriptedModel([Say("Noted."), *(Say(f"Answer {n}.") for n in range(len(LATER)))])
    memory = ServiceMemory(service.client, tenant_id=TENANT, contact_id="c-strands", recall=True)
    agent = a_strands_agent(model, memory)
    for text in [PASTED, *LATER]:
        agent(text)
    assert fold_everything_queued(service.api) > 0
    model.script += [
        UseTool(RECALL_TOOL_NAME, {"query": QUERY}, "tooluse_recall"),
        Say("Clause 14.2 has the Supplier pay within 30 days of a written claim."),
    ]

    agent(ASKED)

    asking, answered = model.calls[-2:]
    assert sorted(asking.tool_names) == ["look_up", RECALL_TOOL_NAME]
    assert not holds_the_clause(asking.messages), "the clause is still in the window"
    assert len(asking.messages) <= CAP + 1
    result = answered.messages[-1]["content"][0]["toolResult"]
    assert (result["toolUseId"], result["status"]) == ("tooluse_recall", "success")
    assert CLAUSE in result["content"][0]["text"]
    # The best match is the pasted message, not the model's own call just recorded.
    first = result["content"][0]["text"].split("\n\n")[1]
    assert first.startswith("[1] user, ")
    assert first.endswith(f":\n{PASTED}")
    assert all(strands_problems(call) == [] for call in model.calls)
    # The workflow is unchanged: one converse a message, the recall round recorded as
    # Strands made it, and the reply after it.
    counters = service.client.memory(TENANT, "c-strands").counters
    assert counters["turnsRecorded"] == 2 * (1 + len(LATER)) + 4
    turns = recorded(service, "c-strands")
    calls, results = recall_calls_and_results(turns)
    assert [call["input"] for call in calls] == [{"query": QUERY}]
    assert CLAUSE in results[0]["content"][0]["text"]
    assert turns[-1]["content"] == [
        {"text": "Clause 14.2 has the Supplier pay within 30 days of a written claim."}
    ]


def test_a_strands_agent_gets_no_recall_tool_unless_asked(service: Service):
    model = ScriptedModel([Say("Hello.")])
    memory = ServiceMemory(service.client, tenant_id=TENANT, contact_id="c-0")
    agent = a_strands_agent(model, memory)

    agent("Hi")

    assert model.calls[0].tool_names == ["look_up"]


def test_a_strands_agent_with_its_own_recall_conversation_tool_is_refused(service: Service):
    @tool(name=RECALL_TOOL_NAME)
    def own_recall(query: str) -> str:
        """The agent's own tool of the same name."""
        return query

    memory = ServiceMemory(service.client, tenant_id=TENANT, contact_id="c-1", recall=True)
    with pytest.raises(ValueError, match=RECALL_TOOL_NAME):
        Agent(model=ScriptedModel(), tools=[own_recall], conversation_manager=memory)


# -- LangChain ------------------------------------------------------------------------------


ChatReply = chat.Say | chat.CallTools


class ToolsOffered(AgentMiddleware[Any, Any, Any]):
    """Keeps the names of the tools each model call is offered (placed after the memory's
    middleware, so it sees the request the model gets)."""

    def __init__(self) -> None:
        super().__init__()
        self.offered: list[list[str]] = []

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        self.offered.append(sorted(getattr(tool, "name", "?") for tool in request.tools))
        return handler(request)


class ScriptedChat:
    """Any chat model: the scripted one, which keeps the messages of every call."""

    def __init__(self, script: list[ChatReply]) -> None:
        self.model = chat.ScriptedChatModel(script=script)

    def more(self, *replies: ChatReply) -> None:
        self.model.script.extend(replies)

    def calls(self) -> list[list[BaseMessage]]:
        return [call.messages for call in self.model.calls]


class StubbedChatBedrockConverse:
    """A real `ChatBedrockConverse` whose bedrock-runtime client is `StubbedBedrock`: the
    tool's spec and the tool results reach Bedrock as langchain-aws sends them."""

    def __init__(self, script: list[ChatReply]) -> None:
        self.bedrock = StubbedBedrock([])
        self.more(*script)
        self.model = ChatBedrockConverse(
            model_id=MODEL_ID,
            client=self.bedrock.client,
            region_name="us-east-1",
            disable_streaming=True,
        )

    def more(self, *replies: ChatReply) -> None:
        for reply in replies:
            if isinstance(reply, chat.Say):
                answer = converse_answer([{"text": reply.text}], "end_turn")
            else:
                uses = [
                    {"toolUse": {"toolUseId": id_, "name": name, "input": args}}
                    for name, args, id_ in reply.calls
                ]
                answer = converse_answer(uses, "tool_use")
            self.bedrock.stubber.add_response("converse", answer)

    def calls(self) -> list[Any]:
        return [sent["messages"] for sent in self.bedrock.sent]


ChatHarness = ScriptedChat | StubbedChatBedrockConverse


@pytest.fixture(params=["any-chat-model", "ChatBedrockConverse"])
def chat_model(request: pytest.FixtureRequest) -> Callable[[list[ChatReply]], ChatHarness]:
    return ScriptedChat if request.param == "any-chat-model" else StubbedChatBedrockConverse


def test_a_langchain_agent_recalls_a_clause_the_window_no_longer_holds(
    service: Service, chat_model: Callable[[list[ChatReply]], ChatHarness]
):
    model = chat_model([chat.Say("Noted."), *(chat.Say(f"Answer {n}.") for n in range(len(LATER)))])
    memory = ServiceMemoryMiddleware(service.client, TENANT, "c-langchain", recall=True)
    offered = ToolsOffered()
    agent = create_agent(
        model.model,
        tools=[look_up],
        system_prompt="You are Acme's contracts desk. Quote the contract exactly.",
        middleware=[memory, offered],
    )
    for text in [PASTED, *LATER]:
        agent.invoke({"messages": [HumanMessage(content=text)]})
    assert fold_everything_queued(service.api) > 0
    model.more(
        chat.CallTools((RECALL_TOOL_NAME, {"query": QUERY}, "call_recall")),
        chat.Say("Clause 14.2 has the Supplier pay within 30 days of a written claim."),
    )

    state = agent.invoke({"messages": [HumanMessage(content=ASKED)]})

    assert offered.offered[-1] == ["look_up", RECALL_TOOL_NAME]
    asking, answered = model.calls()[-2:]
    assert not holds_the_clause(_plain(asking)), "the clause is still in the window"
    assert CLAUSE in json.dumps(_plain(answered[-1]), ensure_ascii=False)
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert (tool_message.name, tool_message.status) == (RECALL_TOOL_NAME, "success")
    assert CLAUSE in str(tool_message.content)
    assert isinstance(state["messages"][-1], AIMessage)
    # The workflow is unchanged: the recall round is recorded like any tool round.
    turns = recorded(service, "c-langchain")
    calls, results = recall_calls_and_results(turns)
    assert [call["input"] for call in calls] == [{"query": QUERY}]
    assert CLAUSE in results[0]["content"][0]["text"]
    assert turns[-1]["content"] == [
        {"text": "Clause 14.2 has the Supplier pay within 30 days of a written claim."}
    ]
    if isinstance(model, StubbedChatBedrockConverse):
        sent = model.bedrock.sent[-2]
        (spec,) = [t for t in sent["toolConfig"]["tools"] if t["toolSpec"]["name"] != "look_up"]
        assert spec["toolSpec"]["inputSchema"]["json"]["required"] == ["query"]
        assert converse_problems({k: v for k, v in sent.items() if k != "modelId"}) == []


def test_a_refused_recall_reaches_the_langchain_model_as_an_error(service: Service):
    model = ScriptedChat(
        [
            chat.Say("Noted."),
            chat.CallTools((RECALL_TOOL_NAME, {"query": "   "}, "call_blank")),
            chat.Say("I could not look it up."),
        ]
    )
    memory = ServiceMemoryMiddleware(service.client, TENANT, "c-blank", recall=True)
    agent = create_agent(model.model, tools=[], middleware=[memory])
    agent.invoke({"messages": [HumanMessage(content=PASTED)]})

    state = agent.invoke({"messages": [HumanMessage(content=ASKED)]})

    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert tool_message.status == "error"
    assert "query" in str(tool_message.content)


def test_a_langchain_agent_gets_no_recall_tool_unless_asked(service: Service):
    model = ScriptedChat([chat.Say("Hello.")])
    offered = ToolsOffered()
    memory = ServiceMemoryMiddleware(service.client, TENANT, "c-0")
    agent = create_agent(model.model, tools=[look_up], middleware=[memory, offered])

    agent.invoke({"messages": [HumanMessage(content="Hi")]})

    assert memory.tools == []
    assert offered.offered == [["look_up"]]


def _plain(value: Any) -> Any:
    """LangChain messages as JSON values (Bedrock's requests already are)."""
    if isinstance(value, BaseMessage):
        return value.model_dump()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
