"""The service as a LangChain agent's memory: `ServiceMemoryMiddleware`, for `create_agent`.

```python
from langchain.agents import create_agent
from langchain_aws import ChatBedrockConverse
from conversation_memory_client import MemoryClient
from conversation_memory_client.langchain import Escalated, ServiceMemoryMiddleware

client = MemoryClient.over_http("https://memory.example.com")
agent = create_agent(
    ChatBedrockConverse(model=MODEL_ID),
    tools=[get_order],
    system_prompt=AGENT_PROMPT,
    middleware=[ServiceMemoryMiddleware(client, tenant_id="acme", contact_id="c-42")],
)
try:
    reply = agent.invoke({"messages": [{"role": "user", "content": "Where is my order?"}]})
except Escalated as escalation:
    hand_over_to_a_person(escalation.reason, escalation.turn_count)
```

An invocation whose last message is a new human message calls `converse` once,
before the first model call (`before_agent`). The graph's messages are then
replaced by the service's window converted to LangChain messages (`HumanMessage`,
`AIMessage` with its `tool_calls`, `ToolMessage` with its `tool_call_id`), the new
message last in the service's form: with or without a checkpointer, the state is
the service's bounded window followed by what this run adds, and other middleware
see it. Each model call gets the agent's own system prompt followed by the
service's memory (`converse["system"]`): the agent's prompt is the stable prefix
a provider can cache. Every reply (with its tool calls and usage) is recorded with
`record` as the model returns it, and each round of tool results before the next
model call (or at the end of the run). An `escalate` decision raises `Escalated`
out of the invocation: no model runs.

The fragment's cache points reach `ChatBedrockConverse` as raw `{"cachePoint": ...}`
content blocks, which langchain-aws passes through to Bedrock; any other chat model
gets the same messages without them.

What the middleware remembers between steps lives in the graph's state (private
keys), so an interrupted run resumes from a checkpoint in another process; the
turns it records carry ids derived from the LangChain messages', so a step run
again records nothing twice. An invocation with no new human message (a resume,
or input that adds none) goes on from the state as it is and records what it adds.

With `recall=True` the middleware also gives the agent a tool, `recall_conversation`,
that answers the model's request for the exact words of older turns from the service
(`MemoryClient.recall`) for this contact. The workflow is unchanged: `converse` still
runs once an invocation, and recall only when the model calls the tool; the call and
its result are recorded like any other tool's.

One middleware serves one contact's conversation: build the agent per contact.
Put it first in `middleware=[...]`, so the model call it wraps is the one sent.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall, tool_call
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from conversation_memory_client.agent_turns import (
    Escalated,
    converse_blocks,
    stored_tool_result,
    stored_tool_use,
    stored_usage,
)
from conversation_memory_client.client import MemoryClient
from conversation_memory_client.recall_tool import (
    RECALL_TOOL_DESCRIPTION,
    RECALL_TOOL_NAME,
    RecallRefused,
    recall_input_schema,
    recalled,
)
from conversation_memory_client.results import ConverseResult

__all__ = ["Escalated", "ServiceMemoryMiddleware", "ServiceMemoryState"]

_IDS = uuid.UUID("6f0c8c1e-5b7a-4d52-9a3e-2f1d0c7b9e41")
"""The namespace of the message ids this middleware derives (uuid5), so that a step
run again (a resume, a retried node) replays at the service instead of recording twice."""

_CONVERSED = "conversation_memory_conversed"
_SYSTEM = "conversation_memory_system"


class ServiceMemoryState(AgentState[Any]):
    """The agent's state with the middleware's own keys, private to the graph: the id of
    the human message last conversed, and the memory's system blocks from that answer."""

    conversation_memory_conversed: NotRequired[Annotated[str | None, PrivateStateAttr]]
    conversation_memory_system: NotRequired[
        Annotated[list[dict[str, Any]] | None, PrivateStateAttr]
    ]


class ServiceMemoryMiddleware(AgentMiddleware[ServiceMemoryState, Any, Any]):
    """A LangChain agent middleware whose history is the memory service's window.

    `last` is the newest `converse` answer this instance received (window figures,
    memory, turn count). `tools` holds the `recall_conversation` tool with
    `recall=True` (`create_agent` adds it to the agent's), and nothing without.
    """

    state_schema = ServiceMemoryState

    def __init__(
        self, client: MemoryClient, tenant_id: str, contact_id: str, *, recall: bool = False
    ) -> None:
        super().__init__()
        self.client = client
        self.tenant_id = tenant_id
        self.contact_id = contact_id
        self.last: ConverseResult | None = None
        self.tools: list[BaseTool] = [self._recall_tool()] if recall else []

    # -- hooks ---------------------------------------------------------------------------

    def before_agent(
        self, state: ServiceMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Converse the new human message, and put the service's window in its place."""
        messages = state["messages"]
        incoming = messages[-1] if messages else None
        if not isinstance(incoming, HumanMessage) or (
            incoming.id is not None and incoming.id == state.get(_CONVERSED)
        ):
            return None  # nothing new: go on from the state as it is
        content = _incoming_content(incoming)  # refused here, before anything is recorded
        result = self._converse(incoming, content)
        self.last = result
        if result.escalated:
            raise Escalated(result)
        if result.converse is None:
            raise ValueError("the service answered `model` without a Converse fragment")
        window = window_messages(result.converse["messages"])
        if incoming.id is not None and isinstance(window[-1], HumanMessage):
            window[-1] = window[-1].model_copy(update={"id": incoming.id})
        return {
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *window],
            _CONVERSED: incoming.id,
            _SYSTEM: list(result.converse.get("system") or []),
        }

    async def abefore_agent(
        self, state: ServiceMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """`before_agent`, its blocking call in a thread."""
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Record the tool round the model is about to see, call it with the memory after
        the agent's prompt, and record its reply."""
        self._record_tool_round(request.messages)
        response = handler(self._with_memory(request))
        self._record_reply(response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """`wrap_model_call`, its blocking calls in a thread."""
        await asyncio.to_thread(self._record_tool_round, request.messages)
        response = await handler(self._with_memory(request))
        await asyncio.to_thread(self._record_reply, response)
        return response

    def after_agent(
        self, state: ServiceMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Record the tool results a run ends on (a `return_direct` tool, a structured
        response, a middleware that jumped to the end)."""
        self._record_tool_round(state["messages"])
        return None

    async def aafter_agent(
        self, state: ServiceMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """`after_agent`, its blocking call in a thread."""
        return await asyncio.to_thread(self.after_agent, state, runtime)

    # -- the service ---------------------------------------------------------------------

    def _recall_tool(self) -> BaseTool:
        """`recall_conversation` for this contact, with the schema of `recall_tool_spec()`;
        a call the model can correct comes back to it as an error `ToolMessage`."""

        def recall_conversation(**arguments: Any) -> str:
            try:
                return recalled(self.client, self.tenant_id, self.contact_id, arguments)
            except RecallRefused as refusal:
                raise ToolException(str(refusal)) from refusal

        return StructuredTool.from_function(
            recall_conversation,
            name=RECALL_TOOL_NAME,
            description=RECALL_TOOL_DESCRIPTION,
            args_schema=recall_input_schema(),
            handle_tool_error=True,
        )

    def _message_id(self, kind: str, *keys: str) -> str:
        name = "\n".join([self.tenant_id, self.contact_id, kind, *keys])
        return str(uuid.uuid5(_IDS, name))

    def _converse(self, incoming: HumanMessage, content: list[dict[str, Any]]) -> ConverseResult:
        message_id = self._message_id("human", incoming.id) if incoming.id else None
        return converse_blocks(
            self.client, self.tenant_id, self.contact_id, content, message_id=message_id
        )

    def _record_tool_round(self, messages: Sequence[BaseMessage]) -> None:
        """The tool results after the run's last reply, as one `user` turn: a round of
        parallel calls is answered in one message, as Bedrock wants it."""
        results = _tool_round(messages)
        if not results:
            return
        keys = [message.id or f"call:{message.tool_call_id}" for message in results]
        self.client.record(
            self.tenant_id,
            self.contact_id,
            role="user",
            content=[_stored_result(message) for message in results],
            message_id=self._message_id("tools", *keys),
        )

    def _record_reply(self, response: object) -> None:
        reply = _the_reply(response)
        if reply is None:
            return
        content = reply_content(reply)
        if not content:
            return  # an empty reply: nothing the window could replay
        self.client.record(
            self.tenant_id,
            self.contact_id,
            role="assistant",
            content=content,
            usage=bedrock_usage(reply.usage_metadata),
            message_id=self._message_id("reply", reply.id) if reply.id else None,
        )

    # -- the model's input ---------------------------------------------------------------

    def _with_memory(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request with the memory after the agent's own prompt; without the
        fragment's cache points for a model other than `ChatBedrockConverse`."""
        bedrock = takes_cache_points(request.model)
        stored: list[dict[str, Any]] = cast(Mapping[str, Any], request.state).get(_SYSTEM) or []
        memory = [block for raw in stored if (block := _system_block(raw, bedrock)) is not None]
        messages = request.messages if bedrock else _without_bedrock_blocks(request.messages)
        if not memory:
            return request.override(messages=messages)
        own = request.system_message
        system = SystemMessage(
            content=[*_as_blocks(own.content if own else []), *memory],
            **({"id": own.id, "name": own.name} if own else {}),
        )
        return request.override(system_message=system, messages=messages)


# -- LangChain to the service ------------------------------------------------------------


def _incoming_content(message: HumanMessage) -> list[dict[str, Any]]:
    """The human message as converse takes it: its text blocks; anything else is refused."""
    blocks = [message.content] if isinstance(message.content, str) else message.content
    content: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, str):
            content.append({"text": block})
        elif block.get("type") == "text" or ("type" not in block and "text" in block):
            content.append({"text": str(block["text"])})
        else:
            kind = block.get("type") or next(iter(block), "an empty block")
            raise ValueError(f"the memory service stores a message's text, not {kind}")
    return content


def _tool_round(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool messages that end `messages` right after a reply (the run's latest round);
    none when they follow the human message (the window's own results, already stored)."""
    at = len(messages)
    while at > 0 and isinstance(messages[at - 1], ToolMessage):
        at -= 1
    if at == len(messages) or at == 0 or not isinstance(messages[at - 1], AIMessage):
        return []
    return [message for message in messages[at:] if isinstance(message, ToolMessage)]


def _stored_result(message: ToolMessage) -> dict[str, Any]:
    items: list[Mapping[str, Any]] = []
    for block in [message.content] if isinstance(message.content, str) else message.content:
        if isinstance(block, str):
            items.append({"text": block})
        elif block.get("type") == "text" or ("type" not in block and "text" in block):
            items.append({"text": block["text"]})
        elif block.get("type") == "json" or ("type" not in block and "json" in block):
            items.append({"json": block["json"]})
        elif "cachePoint" not in block:
            items.append({str(block.get("type") or next(iter(block), "content")): None})
    return stored_tool_result(message.tool_call_id, items, message.status)


def _the_reply(response: object) -> AIMessage | None:
    if isinstance(response, AIMessage):
        return response
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    if isinstance(response, ModelResponse):
        return next((m for m in response.result if isinstance(m, AIMessage)), None)
    return None


def reply_content(reply: AIMessage) -> list[dict[str, Any]]:
    """The reply's blocks as the service stores them: its text and its tool calls, in
    order; reasoning, citations and the like are left out (the window replays what
    the conversation said, not how the model came to it)."""
    calls: dict[str | None, ToolCall] = {call.get("id"): call for call in reply.tool_calls}
    content: list[dict[str, Any]] = []
    said = [reply.content] if isinstance(reply.content, str) else reply.content
    for block in said:
        if isinstance(block, str):
            text: Any = block
        elif block.get("type") == "text" or ("type" not in block and "text" in block):
            text = block["text"]
        elif block.get("type") in ("tool_use", "tool_call") and block.get("id") in calls:
            call = calls.pop(block["id"])
            content.append(stored_tool_use(str(call["id"]), call["name"], call["args"]))
            continue
        else:
            continue
        if isinstance(text, str) and text.strip():
            content.append({"text": text})
    content += [
        stored_tool_use(str(call["id"]), call["name"], call["args"]) for call in calls.values()
    ]
    return content


def bedrock_usage(usage: Mapping[str, Any] | None) -> dict[str, int] | None:
    """LangChain's `usage_metadata` as Bedrock reports usage. LangChain counts the cached
    prompt tokens in `input_tokens`; Bedrock's `inputTokens` are the ones it processed
    in full, apart from `cacheReadInputTokens` and `cacheWriteInputTokens`."""
    if not usage:
        return None
    details: Mapping[str, Any] = usage.get("input_token_details") or {}
    read = details.get("cache_read")
    written = details.get("cache_creation")
    # Anthropic's per-TTL breakdown of the cache writes, reported instead of cache_creation.
    by_ttl = [details.get(k) for k in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")]
    if any(isinstance(n, int) and n for n in by_ttl):
        written = (written or 0) + sum(n for n in by_ttl if isinstance(n, int))
    reported: dict[str, Any] = {
        "inputTokens": usage.get("input_tokens"),
        "outputTokens": usage.get("output_tokens"),
        "totalTokens": usage.get("total_tokens"),
    }
    if isinstance(read, int):
        reported["cacheReadInputTokens"] = read
    if isinstance(written, int):
        reported["cacheWriteInputTokens"] = written
    if isinstance(reported["inputTokens"], int):
        cached = (read if isinstance(read, int) else 0) + (written or 0)
        reported["inputTokens"] = max(0, reported["inputTokens"] - cached)
    return stored_usage(reported)


# -- the service to LangChain ------------------------------------------------------------


def window_messages(messages: Sequence[Mapping[str, Any]]) -> list[AnyMessage]:
    """Converse messages as LangChain messages, in Bedrock's own order.

    A user message becomes one `ToolMessage` per tool result (first, as Bedrock wants
    them) and a `HumanMessage` of its text; an assistant message an `AIMessage` whose
    content holds its text and `tool_use` blocks, as `ChatBedrockConverse` itself
    answers, with the calls in `tool_calls`. Cache points stay where they are, as raw
    `{"cachePoint": ...}` blocks (dropped for other models at the model call).
    """
    converted: list[AnyMessage] = []
    names: dict[str, str] = {}
    for message in messages:
        if message["role"] == "assistant":
            reply = _ai_message(message["content"])
            names.update({str(c["id"]): c["name"] for c in reply.tool_calls})
            converted.append(reply)
        else:
            converted += _user_messages(message["content"], names)
    return converted


def _ai_message(blocks: Sequence[Mapping[str, Any]]) -> AIMessage:
    content: list[str | dict[str, Any]] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if "text" in block:
            content.append({"type": "text", "text": block["text"]})
        elif "toolUse" in block:
            use = block["toolUse"]
            arguments = dict(use.get("input") or {})
            content.append(
                {
                    "type": "tool_use",
                    "id": use["toolUseId"],
                    "name": use["name"],
                    "input": arguments,
                }
            )
            calls.append(tool_call(name=use["name"], args=arguments, id=use["toolUseId"]))
        elif "cachePoint" in block:
            content.append(dict(block))
    return AIMessage(content=content, tool_calls=calls)


def _user_messages(
    blocks: Sequence[Mapping[str, Any]], names: Mapping[str, str]
) -> list[AnyMessage]:
    results: list[ToolMessage] = []
    points: list[str | dict[str, Any]] = []  # cache points before the first text
    said: list[str | dict[str, Any]] = []
    for block in blocks:
        if "toolResult" in block:
            results.append(_tool_message(block["toolResult"], names))
        elif "text" in block:
            said.append({"type": "text", "text": block["text"]})
        elif "cachePoint" in block:
            (said if said else points).append(dict(block))
    converted: list[AnyMessage] = [*results]
    if said:
        converted.append(HumanMessage(content=[*points, *said]))
    elif points and results:  # the message ends with its results, then a cache point
        last = results[-1]
        converted[-1] = last.model_copy(update={"content": [*_as_blocks(last.content), *points]})
    return converted


def _tool_message(result: Mapping[str, Any], names: Mapping[str, str]) -> ToolMessage:
    texts = [
        str(item["text"]) if "text" in item else json.dumps(item["json"])
        for item in result.get("content", [])
        if "text" in item or "json" in item
    ]
    content: str | list[str | dict[str, Any]] = (
        texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]
    )
    tool_use_id = str(result["toolUseId"])
    return ToolMessage(
        content=content,
        tool_call_id=tool_use_id,
        name=names.get(tool_use_id),
        status="error" if result.get("status") == "error" else "success",
    )


# -- what reaches which model --------------------------------------------------------------


def takes_cache_points(model: BaseChatModel) -> bool:
    """Whether the model is langchain-aws's `ChatBedrockConverse` (or made from it), which
    passes raw `{"cachePoint": ...}` blocks on to Bedrock; known without importing it."""
    return any(
        cls.__name__ == "ChatBedrockConverse" and cls.__module__.startswith("langchain_aws")
        for cls in type(model).__mro__
    )


def _system_block(block: Mapping[str, Any], bedrock: bool) -> dict[str, Any] | None:
    if "text" in block:
        return {"type": "text", "text": block["text"]}
    if "cachePoint" in block and bedrock:
        return dict(block)
    return None


def _as_blocks(content: str | list[str | dict[str, Any]]) -> list[str | dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]


def _without_bedrock_blocks(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The messages without what only Bedrock takes: cache points, and the `tool_use`
    blocks of a reply whose `tool_calls` already carry them."""
    kept: list[AnyMessage] = []
    for message in messages:
        if isinstance(message.content, str):
            kept.append(message)
            continue
        calls = (
            {call.get("id") for call in message.tool_calls}
            if isinstance(message, AIMessage)
            else set()
        )
        content = [
            block
            for block in message.content
            if not (
                isinstance(block, dict)
                and (
                    "cachePoint" in block
                    or (block.get("type") == "tool_use" and block.get("id") in calls)
                )
            )
        ]
        if len(content) == len(message.content):
            kept.append(message)
        else:  # a reply of tool calls only is "", as most providers answer it
            kept.append(message.model_copy(update={"content": content or ""}))
    return kept
