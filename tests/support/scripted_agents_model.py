"""A scripted OpenAI Agents SDK `Model`: it answers from a script and keeps every request.

Each call pops the next reply: `Say(text)` (an assistant message, ending the turn)
or `CallTools([...])` (one function call or several in parallel, each with its
own `call_id`). Every request's instructions and Responses input items are kept
in `calls`, so a test can check what the model was given. No network, no key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from agents import ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

USAGE = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
"""Each reply's usage (OpenAI's names), as a provider reports it."""


@dataclass(frozen=True)
class Say:
    """An assistant message: the model's answer, ending the run."""

    text: str


@dataclass(frozen=True)
class Call:
    """One function call of a reply."""

    name: str
    arguments: dict[str, Any]
    call_id: str


@dataclass(frozen=True)
class CallTools:
    """A reply of function calls (several are parallel calls in one response)."""

    calls: list[Call]


@dataclass(frozen=True)
class ModelRequest:
    """What one model call was given."""

    instructions: str | None
    input: list[dict[str, Any]]


@dataclass
class ScriptedAgentsModel(Model):
    """Answers each call with the script's next reply; `calls` keeps the requests."""

    script: list[Say | CallTools] = field(default_factory=list)
    calls: list[ModelRequest] = field(default_factory=list)

    @classmethod
    def playing(cls, replies: Iterable[Say | CallTools]) -> ScriptedAgentsModel:
        return cls(script=list(replies))

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        self.calls.append(ModelRequest(system_instructions, _plain(items)))
        if not self.script:
            raise AssertionError(f"model call {len(self.calls)} has no scripted reply left")
        reply = self.script.pop(0)
        number = len(self.calls)
        output: list[Any]
        if isinstance(reply, Say):
            output = [
                ResponseOutputMessage(
                    id=f"msg_{number}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[
                        ResponseOutputText(type="output_text", text=reply.text, annotations=[])
                    ],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{call.call_id}",
                    type="function_call",
                    call_id=call.call_id,
                    name=call.name,
                    arguments=json.dumps(call.arguments),
                )
                for call in reply.calls
            ]
        return ModelResponse(
            output=output,
            usage=copy.deepcopy(USAGE),
            response_id=f"resp_{number}",
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("ScriptedAgentsModel answers Runner.run, not run_streamed")


def _plain(items: list[Any]) -> list[dict[str, Any]]:
    """The input items as JSON values (the SDK may hand over pydantic models)."""
    plain = []
    for item in items:
        dumped = item.model_dump(exclude_unset=True) if hasattr(item, "model_dump") else item
        plain.append(copy.deepcopy(dict(dumped)))
    return plain
