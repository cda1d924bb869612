"""A Strands `Model` that plays a script: text or a `look_up` tool call, streamed as Bedrock
streams them, keeping every request it was given (no Bedrock, no network)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from strands import tool
from strands.models import Model


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Call:
    tool_use_id: str
    item: str


@dataclass
class ModelCall:
    system: list[dict[str, Any]]
    messages: list[dict[str, Any]]


@dataclass
class ScriptedModel(Model):
    """Streams the next scripted reply as Bedrock's stream events; keeps each request."""

    script: list[Say | Call]
    calls: list[ModelCall] = field(default_factory=list)

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        *,
        system_prompt_content: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        self.calls.append(
            ModelCall(
                json.loads(json.dumps(system_prompt_content or [])),
                json.loads(json.dumps(messages)),
            )
        )
        reply = self.script.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(reply, Say):
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": reply.text}}}
            yield {"contentBlockStop": {}}
            stop = "end_turn"
        else:
            start = {"toolUse": {"toolUseId": reply.tool_use_id, "name": "look_up"}}
            yield {"contentBlockStart": {"start": start}}
            arguments = json.dumps({"item": reply.item})
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}}
            yield {"contentBlockStop": {}}
            stop = "tool_use"
        yield {"messageStop": {"stopReason": stop}}
        usage = {"inputTokens": 100, "outputTokens": 10, "totalTokens": 110}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}


@tool
def look_up(item: str) -> str:
    """Look an item up in the warehouse.

    Args:
        item: the item's name
    """
    return f"{item}: 3 in stock"
