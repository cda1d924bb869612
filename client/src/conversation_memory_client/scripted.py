"""A Strands Agents model that plays a script: try an agent, or test one, without Bedrock.

```python
from strands import Agent, tool
from conversation_memory_client import MemoryClient
from conversation_memory_client.scripted import Say, ScriptedModel, UseTool
from conversation_memory_client.strands import ServiceMemory

@tool
def look_up(item: str) -> str:
    '''Look an item up in the warehouse.'''
    return f"{item}: 3 in stock"

model = ScriptedModel([UseTool("look_up", {"item": "tea"}), Say("Tea is in stock.")])
memory = MemoryClient.over_http("http://127.0.0.1:8000")  # `make run`
agent = Agent(
    model=model,
    tools=[look_up],
    conversation_manager=ServiceMemory(memory, tenant_id="demo", contact_id="alice"),
)
agent("Is there any tea?")  # the model asks for look_up, Strands runs it, the model answers
model.calls[-1].messages    # what the model was given: the service's window, and the tool round
```

Each model call takes the script's next reply and streams it as Bedrock's
ConverseStream does (text, or one tool call with its input as JSON), with a
fixed usage report; it keeps what it was given (`calls`). The model itself
needs no AWS account, no credentials and no network. A call with the script
played out raises `ScriptExhausted`.

This module needs Strands Agents (`pip install './client[strands]'`); the rest of
the client does not import it.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from strands.models import Model
from strands.types.content import Messages, SystemContentBlock
from strands.types.event_loop import Usage
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

__all__ = ["ModelCall", "Say", "ScriptExhausted", "ScriptedModel", "UseTool"]

T = TypeVar("T", bound=BaseModel)

USAGE: Usage = {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}
"""The usage each reply reports (the service records it with the reply)."""


@dataclass(frozen=True)
class Say:
    """A reply of text: the model's answer, ending its turn."""

    text: str


@dataclass(frozen=True)
class UseTool:
    """A reply that calls a tool: Strands runs it and calls the model again with its result.

    `tool_use_id` is drawn (`tooluse_<hex>`) when not given.
    """

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    tool_use_id: str | None = None


@dataclass(frozen=True)
class ModelCall:
    """What one model call was given: system blocks, messages, and the tools' names."""

    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tool_names: list[str]


class ScriptExhausted(RuntimeError):
    """The model was called once more than its script has replies."""


class ScriptedModel(Model):
    """A Strands `Model` that streams the next scripted reply and keeps every request.

    `script` holds the replies in order: `Say`, `UseTool`, or a plain string (a `Say`).
    More can be appended to `script` between calls.
    """

    def __init__(self, script: Iterable[Say | UseTool | str] = ()) -> None:
        self.script: list[Say | UseTool | str] = list(script)
        self.calls: list[ModelCall] = []

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> dict[str, Any]:
        """No configuration."""
        return {}

    def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Not scripted: ask with `agent(prompt, structured_output_model=...)` instead."""
        raise NotImplementedError("ScriptedModel does not script structured output")

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        *,
        system_prompt_content: list[SystemContentBlock] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[StreamEvent]:
        """The next reply as Bedrock's stream events, after keeping this call's request."""
        system = system_prompt_content
        if system is None and system_prompt:
            system = [{"text": system_prompt}]
        self.calls.append(
            ModelCall(
                system=cast(list[dict[str, Any]], copy.deepcopy(system or [])),
                messages=cast(list[dict[str, Any]], copy.deepcopy(messages)),
                tool_names=[spec["name"] for spec in tool_specs or []],
            )
        )
        if not self.script:
            raise ScriptExhausted(
                f"model call {len(self.calls)} has no scripted reply left: "
                "append more to ScriptedModel.script"
            )
        reply = self.script.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(reply, UseTool):
            tool_use_id = reply.tool_use_id or f"tooluse_{uuid.uuid4().hex[:16]}"
            yield {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": tool_use_id, "name": reply.name}}
                }
            }
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(reply.input)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            text = reply.text if isinstance(reply, Say) else reply
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": text}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        yield {"metadata": {"usage": copy.copy(USAGE), "metrics": {"latencyMs": 1}}}
