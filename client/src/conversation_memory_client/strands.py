"""The service as a Strands Agents agent's memory: `ServiceMemory`, its conversation manager.

```python
from strands import Agent
from conversation_memory_client import MemoryClient
from conversation_memory_client.strands import Escalated, ServiceMemory

client = MemoryClient.over_http("https://memory.example.com")
agent = Agent(
    system_prompt=[{"text": AGENT_PROMPT}, {"cachePoint": {"type": "default"}}],
    tools=[get_order],
    conversation_manager=ServiceMemory(client, tenant_id="acme", contact_id="c-42"),
)
try:
    reply = agent("Where is my order?")
except Escalated as escalation:
    hand_over_to_a_person(escalation.reason, escalation.turn_count)
```

Each invocation with a new user message calls `converse` once, before anything
is added to the agent's history. The model then sees the service's window
(`converse["messages"]`, the new message last), followed by what this invocation
adds (its tool calls and their results), and the agent's own system prompt followed
by the service's `converse["system"]` (the memory): the agent's prompt is the
stable prefix Bedrock can cache. Every reply, tool call and tool result is recorded
with `record` as Strands adds it. An `escalate` decision raises `Escalated` out of
the call: no model runs.

With `recall=True` the agent also gets a tool, `recall_conversation` (registered when
the agent is built), that answers the model's request for the exact words of older
turns from the service (`MemoryClient.recall`) for this contact. The workflow is
unchanged: `converse` still runs once an invocation, and recall only when the model
calls the tool; the call and its result are recorded like any other tool's.

An invocation with no new message (`agent()` with no prompt, or the answer to an
interrupt) goes on from the history the agent holds and records what it adds.
`agent.structured_output(...)` passes no message through the invocation's hooks;
ask for structured output with `agent(prompt, structured_output_model=...)`.

One `ServiceMemory` holds one conversation and serves one agent at a time.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from strands.agent.conversation_manager import ConversationManager
from strands.hooks import (
    AfterInvocationEvent,
    AgentInitializedEvent,
    BeforeInvocationEvent,
    HookOrder,
    HookRegistry,
    MessageAddedEvent,
)
from strands.tools.tools import PythonAgentTool
from strands.types.content import Message, Messages, SystemContentBlock
from strands.types.tools import AgentTool, ToolResult, ToolSpec, ToolUse

from conversation_memory_client.agent_turns import (
    Escalated,
    converse_blocks,
    stored_tool_result,
    stored_tool_use,
    stored_usage,
)
from conversation_memory_client.client import MemoryClient
from conversation_memory_client.recall_tool import RECALL_TOOL_NAME, answer_recall, recall_tool_spec
from conversation_memory_client.results import ConverseResult

if TYPE_CHECKING:
    from strands.agent.agent import Agent

__all__ = ["Escalated", "ServiceMemory"]


class ServiceMemory(ConversationManager):
    """A Strands conversation manager whose history is the memory service's window.

    `last` is the newest `converse` answer (window figures, memory, turn count).
    `recall_tool` is the `recall_conversation` tool added to the agent with
    `recall=True`, None without.
    """

    def __init__(
        self, client: MemoryClient, *, tenant_id: str, contact_id: str, recall: bool = False
    ) -> None:
        super().__init__()
        self.client = client
        self.tenant_id = tenant_id
        self.contact_id = contact_id
        self.recall_tool: AgentTool | None = None
        if recall:
            spec = cast(ToolSpec, recall_tool_spec()["toolSpec"])
            self.recall_tool = PythonAgentTool(RECALL_TOOL_NAME, spec, self._recall)
        self.last: ConverseResult | None = None
        self._service_system: list[dict[str, Any]] = []
        self._own_prompt: list[SystemContentBlock] | None = None
        self._prompt_swapped = False
        self._recording = False
        self._incoming: Message | None = None

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Strands calls this when the agent is built: converse before each invocation,
        record each message as it is added."""
        super().register_hooks(registry, **kwargs)
        # Last, so the message converse records is the one other hooks let through
        # (redacted, or not cancelled at all).
        registry.add_callback(BeforeInvocationEvent, self._begin, order=HookOrder.SDK_LAST)
        registry.add_callback(MessageAddedEvent, self._record)
        registry.add_callback(AfterInvocationEvent, self._end)
        if self.recall_tool is not None:
            registry.add_callback(AgentInitializedEvent, self._add_recall_tool)

    # -- the conversation manager's contract ---------------------------------------

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """Nothing to do: the service bounds the window, and the next call replaces it."""

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """The window is already the service's bounded one; an overflow within one
        invocation (its own tool loop) is not for the memory to cut, so it is raised."""
        if e is not None:
            raise e

    # -- hooks -----------------------------------------------------------------------

    async def _begin(self, event: BeforeInvocationEvent) -> None:
        agent = event.agent
        self._restore_prompt(agent)
        self._recording = False
        if event.cancel:
            return
        if event.messages:
            incoming = _the_users_message(event.messages)
            result = await asyncio.to_thread(self._converse, incoming)
            self.last = result
            if result.escalated:
                raise Escalated(result)
            if result.converse is None:
                raise ValueError("the service answered `model` without a Converse fragment")
            window = cast(Messages, copy.deepcopy(result.converse["messages"]))
            # The new message in the service's form (merged with pending tool results,
            # after the history's cache point) goes in as the invocation's input, so
            # Strands adds it to the history and other hooks see it added.
            agent.messages[:] = window[:-1]
            self._incoming = window[-1]
            event.messages = [window[-1]]
            self._service_system = copy.deepcopy(list(result.converse.get("system") or []))
        self._swap_prompt(agent)
        self._recording = True

    async def _record(self, event: MessageAddedEvent) -> None:
        message = event.message
        if not self._recording or message is self._incoming:
            return
        if message["role"] == "assistant":
            content = [kept for block in message["content"] if (kept := _reply_block(block))]
            if content:
                usage = stored_usage(message.get("metadata", {}).get("usage"))
                await asyncio.to_thread(self._record_turn, "assistant", content, usage)
            return
        # Strands adds a user message within an invocation to return tool results;
        # any text beside them is its own prompting, not the contact's.
        results = [
            _tool_result(block["toolResult"])
            for block in message["content"]
            if "toolResult" in block
        ]
        if results:
            await asyncio.to_thread(self._record_turn, "user", results, None)

    def _end(self, event: AfterInvocationEvent) -> None:
        self._recording = False
        self._incoming = None
        self._restore_prompt(event.agent)

    def _add_recall_tool(self, event: AgentInitializedEvent) -> None:
        tools, recall_tool = event.agent.tool_registry, self.recall_tool
        if recall_tool is None:
            return
        if RECALL_TOOL_NAME in tools.registry:
            # Strands would replace the agent's own tool of that name without a word.
            raise ValueError(
                f"the agent already has a tool named {RECALL_TOOL_NAME!r}: "
                "leave it out, or build ServiceMemory without recall=True"
            )
        tools.register_tool(recall_tool)

    # -- the service -------------------------------------------------------------------

    def _recall(self, tool_use: ToolUse, **invocation_state: Any) -> ToolResult:
        """The model's `recall_conversation` call, answered for this contact (Strands runs
        it in a thread)."""
        block = answer_recall(self.client, self.tenant_id, self.contact_id, tool_use)
        return cast(ToolResult, block["toolResult"])

    def _converse(self, message: Message) -> ConverseResult:
        content = [_incoming_block(block) for block in message["content"]]
        return converse_blocks(self.client, self.tenant_id, self.contact_id, content)

    def _record_turn(
        self, role: str, content: list[dict[str, Any]], usage: dict[str, int] | None
    ) -> None:
        self.client.record(
            self.tenant_id,
            self.contact_id,
            role="assistant" if role == "assistant" else "user",
            content=content,
            usage=usage,
        )

    # -- the system prompt -----------------------------------------------------------

    def _swap_prompt(self, agent: Agent) -> None:
        """The agent's own prompt first (its cacheable prefix), then the memory."""
        if not self._service_system:
            return
        self._own_prompt = agent.system_prompt_content
        own: list[SystemContentBlock] = list(self._own_prompt or [])
        agent.system_prompt = [*own, *cast(list[SystemContentBlock], self._service_system)]
        self._prompt_swapped = True

    def _restore_prompt(self, agent: Agent) -> None:
        # Also at the start of an invocation: one that failed before it ended still
        # leaves the agent with its own prompt.
        if self._prompt_swapped:
            agent.system_prompt = self._own_prompt
            self._prompt_swapped = False


def _the_users_message(messages: Messages) -> Message:
    if len(messages) != 1 or messages[0]["role"] != "user":
        raise ValueError(
            "ServiceMemory takes one user message an invocation (a string or content "
            "blocks): the service holds the history"
        )
    return messages[0]


def _incoming_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A block of the contact's message as converse takes it; what it cannot store is
    refused here, before anything is recorded."""
    if "text" in block:
        return {"text": block["text"]}
    if "toolResult" in block:
        return _tool_result(block["toolResult"])
    kind = next(iter(block), "an empty block")
    raise ValueError(f"the memory service stores text and tool results, not {kind}")


def _reply_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A block of the model's reply as the service stores it, or None to leave it out
    (reasoning, citations and the like: the service keeps what the window replays)."""
    if "text" in block:
        return {"text": block["text"]} if str(block["text"]).strip() else None
    if "toolUse" in block:
        call = block["toolUse"]
        return stored_tool_use(call["toolUseId"], call["name"], call.get("input"))
    return None


def _tool_result(result: Mapping[str, Any]) -> dict[str, Any]:
    return stored_tool_result(result["toolUseId"], result.get("content", []), result.get("status"))
