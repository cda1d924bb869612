"""A scripted LangChain chat model: it plays a script of replies and keeps what it was given.

`ScriptedChatModel([CallTools(("look_up", {"item": "tea"}, "call_0")), Say("Tea: 3 in stock.")])`
answers its first call with a tool call and its second with text; each reply carries
`usage_metadata` as a provider reports it (the cached prompt tokens counted in
`input_tokens`). `calls` keeps every request: its system message and its messages,
copied as they were sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

CACHE_READ = 40
"""The prompt tokens every scripted reply says it read from the provider's cache."""


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class CallTools:
    """One reply calling tools: each call is (tool name, arguments, tool call id); several
    are parallel calls."""

    calls: tuple[tuple[str, dict[str, Any], str], ...]

    def __init__(self, *calls: tuple[str, dict[str, Any], str]) -> None:
        object.__setattr__(self, "calls", tuple(calls))


@dataclass(frozen=True)
class ModelCall:
    system: SystemMessage | None
    messages: list[BaseMessage]


class ScriptExhausted(AssertionError):
    """The model was called more often than its script says."""


class ScriptedChatModel(BaseChatModel):
    script: list[Say | CallTools]
    calls: list[ModelCall] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
        sent = messages[1:] if system is not None else messages
        self.calls.append(
            ModelCall(
                system.model_copy(deep=True) if system is not None else None,
                [message.model_copy(deep=True) for message in sent],
            )
        )
        if not self.script:
            raise ScriptExhausted(f"model call {len(self.calls)}: the script is over")
        reply = self.script.pop(0)
        n = len(self.calls)
        usage = {
            "input_tokens": 100 * n + CACHE_READ,
            "output_tokens": 10 + n,
            "total_tokens": 100 * n + CACHE_READ + 10 + n,
            "input_token_details": {"cache_read": CACHE_READ, "cache_creation": 0},
        }
        if isinstance(reply, Say):
            message = AIMessage(content=reply.text, usage_metadata=usage)
        else:
            message = AIMessage(
                content="",
                tool_calls=[tool_call(name=n_, args=a, id=i) for n_, a, i in reply.calls],
                usage_metadata=usage,
            )
        return ChatResult(generations=[ChatGeneration(message=message)])
