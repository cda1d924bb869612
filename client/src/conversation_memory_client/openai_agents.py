"""The service as an OpenAI Agents SDK session: `ServiceSession`.

```python
from agents import Agent, Runner
from conversation_memory_client import MemoryClient
from conversation_memory_client.openai_agents import Escalated, ServiceSession

client = MemoryClient.over_http("https://memory.example.com")
agent = Agent(name="desk", instructions=AGENT_PROMPT, tools=[get_order], model=MODEL)
session = ServiceSession(client, tenant_id="acme", contact_id="c-42")
try:
    result = await Runner.run(agent, "Where is my order?", session=session,
                              run_config=session.run_config())
except Escalated as escalation:
    hand_over_to_a_person(escalation.reason, escalation.turn_count)
```

The SDK reads a session's history (`get_items`) before the new message is known,
then saves the message (`add_items`) before the first model call. So the service
sees the message in `add_items`: it is recorded with `converse`, which answers
the bounded window ending with it. (A streamed run filters its first model input
before that save: the filter records the message there instead.) The window
reaches the model through the run's `RunConfig.call_model_input_filter`
(`session.run_config()` sets it, composed with a filter of your own): before
every model call of the run, the input becomes the window as Responses items
(every `function_call` followed by its `function_call_output`), then what this
run added, and the instructions become the agent's own followed by the memory.
Each response's message and function calls, and each tool output, are recorded
as the SDK saves them, with the response's usage. An `escalate` decision raises
`Escalated` before any model call.

A run without the filter is refused at its first save after a model call, with
a message naming it: the model would have answered without the history.

`get_items` answers the window of the latest message this session recorded, and
what was added since; `clear_session` erases the conversation (the service's
erase route). `pop_item` is refused: the service keeps turns as recorded.

One `ServiceSession` holds one conversation and serves one run at a time.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from agents import RunConfig
from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData
from agents.run_context import RunContextWrapper

from conversation_memory_client.agent_turns import (
    Escalated,
    converse_blocks,
    stored_tool_result,
    stored_tool_use,
)
from conversation_memory_client.client import MemoryClient
from conversation_memory_client.results import ConverseResult

__all__ = ["Escalated", "FilterNotInstalled", "ServiceSession"]

logger = logging.getLogger(__name__)

Role = Literal["assistant", "user"]
Item = dict[str, Any]
"""A Responses input item as JSON (the SDK's `TResponseInputItem` is a union of TypedDicts)."""

_LEFT_OUT = frozenset({"reasoning", "compaction", "item_reference"})
"""Items the model's context carries but the service does not keep: the window replays
messages, calls and their outputs."""


class FilterNotInstalled(RuntimeError):
    """A run used the session without `session.run_config()` (its model input filter)."""


class ServiceSession:
    """An OpenAI Agents SDK `Session` whose history is the memory service's window.

    `last` is the newest `converse` answer (window figures, memory, turn count).
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        client: MemoryClient,
        tenant_id: str,
        contact_id: str,
        *,
        session_id: str | None = None,
    ) -> None:
        self.client = client
        self.tenant_id = tenant_id
        self.contact_id = contact_id
        self.session_id = session_id or f"{tenant_id}/{contact_id}"
        self.last: ConverseResult | None = None
        self._window: list[Item] = []
        self._memory: list[str] = []
        self._since_window: list[Item] = []
        self._input: list[Item] = []
        self._filtered_since_input = True
        self._history_read: int | None = None
        self._recorded_ahead: list[Item] | None = None
        self._usage_reported = 0
        self._usage_of: RunContextWrapper[Any] | None = None

    # -- the run's configuration ---------------------------------------------------------

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """`base` (or a default `RunConfig`) with this session's model input filter,
        run before `base`'s own filter if it has one."""
        base = base or RunConfig()
        own = base.call_model_input_filter
        if own is None:
            return dataclasses.replace(base, call_model_input_filter=self.model_input_filter)
        return dataclasses.replace(
            base, call_model_input_filter=_then(self.model_input_filter, own)
        )

    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """The model's input for this call: the window, then what the run added since the
        new message; the instructions: the agent's own, then the memory."""
        given = [_as_item(item) for item in data.model_data.input]
        if self._history_read is not None:
            # A streamed run filters its first model input before saving the run's input:
            # the message is recorded here, and the save that follows finds it recorded.
            new = given[self._history_read :]
            if new and all(_kind(item) == "user_message" for item in new):
                await self._converse(new, None)
                self._recorded_ahead = copy.deepcopy(new)
        self._filtered_since_input = True
        if not self._input:
            # A run with no new message (resumed from its state): nothing to replace.
            added = given
            window: list[Item] = []
        else:
            added = given[_end_of(self._input, given) :]
            window = copy.deepcopy(self._window)
        instructions = data.model_data.instructions
        if self._memory:
            instructions = "\n\n".join([*([instructions] if instructions else []), *self._memory])
        return ModelInputData(
            input=cast(list[TResponseInputItem], [*window, *added]),
            instructions=instructions,
        )

    # -- the Session protocol ------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The window of the latest message this session recorded, then what was added
        since; with `limit`, the newest items from a user message on, at most `limit`."""
        items = [*self._window, *self._since_window]
        if limit is not None:
            items = _from_a_user_message(items[-limit:] if limit > 0 else [])
        # The SDK reads the history first in a run: the model's input starts with it.
        self._history_read = len(items)
        return cast(list[TResponseInputItem], copy.deepcopy(items))

    async def add_items(
        self, items: list[TResponseInputItem], wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Record what the run saves: the contact's message through `converse` (which may
        escalate), then each response's message and calls, and the tools' outputs."""
        given = [_as_item(item) for item in items]
        if given and all(_kind(item) == "user_message" for item in given):
            if given == self._recorded_ahead:
                self._recorded_ahead = None
                return
            await self._converse(given, wrapper)
            return
        if not self._filtered_since_input:
            raise FilterNotInstalled(
                "ServiceSession needs its model input filter: run with "
                "Runner.run(agent, text, session=session, run_config=session.run_config())"
            )
        for role, content in _turns_of(given):
            usage = self._next_usage(wrapper) if role == "assistant" else None
            await asyncio.to_thread(
                self.client.record,
                self.tenant_id,
                self.contact_id,
                role=role,
                content=content,
                usage=usage,
            )
        self._since_window.extend(copy.deepcopy(given))

    async def pop_item(
        self, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Refused: the service keeps every turn as recorded (an audit trail), so none can
        be taken back; `clear_session()` erases the whole conversation."""
        raise NotImplementedError(
            "the memory service keeps every turn as recorded and cannot take one back; "
            "record the correction as a new message, or erase the conversation with "
            "clear_session()"
        )

    async def clear_session(self, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Erase everything the service stores for the contact (its erase route)."""
        await asyncio.to_thread(self.client.forget, self.tenant_id, self.contact_id)
        self.last = None
        self._window, self._memory, self._since_window, self._input = [], [], [], []

    # -- the service -----------------------------------------------------------------------

    async def _converse(self, given: list[Item], wrapper: RunContextWrapper[Any] | None) -> None:
        content = [block for item in given for block in _message_blocks(item)]
        result = await asyncio.to_thread(
            converse_blocks, self.client, self.tenant_id, self.contact_id, content
        )
        self.last = result
        self._history_read = None
        if result.escalated:
            raise Escalated(result)
        if result.converse is None:
            raise ValueError("the service answered `model` without a Converse fragment")
        self._window = _responses_items(result.converse["messages"])
        self._memory = [
            str(block["text"]) for block in result.converse.get("system") or [] if "text" in block
        ]
        self._since_window = []
        self._input = copy.deepcopy(given)
        self._filtered_since_input = False
        self._usage_of = wrapper
        self._usage_reported = len(wrapper.usage.request_usage_entries) if wrapper else 0

    def _next_usage(self, wrapper: RunContextWrapper[Any] | None) -> dict[str, int] | None:
        """The usage of the response this assistant turn came from: the run's next
        per-request entry not yet recorded."""
        if wrapper is None:
            return None
        if wrapper is not self._usage_of:
            self._usage_of, self._usage_reported = wrapper, 0
        entries = wrapper.usage.request_usage_entries
        if self._usage_reported >= len(entries):
            return None
        # The SDK saves each response's items as it processes that response: the newest
        # entry is this one's (a response left out entirely, reasoning only, is skipped).
        entry = entries[-1]
        self._usage_reported = len(entries)
        usage = {
            "inputTokens": entry.input_tokens,
            "outputTokens": entry.output_tokens,
            "totalTokens": entry.total_tokens,
        }
        details = entry.input_tokens_details
        if details.cached_tokens:
            usage["cacheReadInputTokens"] = details.cached_tokens
        cache_write = getattr(details, "cache_write_tokens", 0)
        if cache_write:
            usage["cacheWriteInputTokens"] = cache_write
        return usage


# -- Responses items and Converse blocks ------------------------------------------------------


def _as_item(item: Any) -> Item:
    if hasattr(item, "model_dump"):
        return cast(Item, item.model_dump(exclude_unset=True))
    return dict(item)


def _kind(item: Mapping[str, Any]) -> str:
    """`user_message`, `assistant_message`, `function_call`, `function_call_output`, or the
    item's own type."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role == "user":
            return "user_message"
        if role == "assistant":
            return "assistant_message"
        return f"{role} message"
    return str(kind)


def _message_blocks(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The contact's message as Converse text blocks; anything the service cannot store is
    refused here, before anything is recorded."""
    content = item.get("content")
    if isinstance(content, str):
        return [{"text": content}]
    blocks = []
    for part in content or []:
        if part.get("type") == "input_text":
            blocks.append({"text": part["text"]})
        else:
            raise ValueError(
                f"the memory service stores text and tool results, not {part.get('type')}"
            )
    return blocks


def _text_of(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [str(part["text"]) for part in content or [] if "text" in part]


def _turns_of(items: Iterable[Mapping[str, Any]]) -> list[tuple[Role, list[dict[str, Any]]]]:
    """The items as the service's turns: a response's messages and function calls as one
    assistant turn, the outputs that follow as one user turn."""
    turns: list[tuple[Role, list[dict[str, Any]]]] = []
    for item in items:
        kind = _kind(item)
        role: Role
        if kind in _LEFT_OUT:
            continue
        if kind == "assistant_message":
            role = "assistant"
            blocks = [{"text": text} for text in _text_of(item) if text.strip()]
        elif kind == "function_call":
            role = "assistant"
            blocks = [stored_tool_use(item["call_id"], item["name"], _arguments(item))]
        elif kind == "function_call_output":
            role = "user"
            blocks = [stored_tool_result(item["call_id"], _output_items(item.get("output")))]
        else:
            # A hosted tool's call (web search, code interpreter, MCP...) has no Converse
            # form; refusing it would fail the run after its model answered.
            logger.warning(
                "a %s item is not recorded: the service keeps messages, function calls "
                "and their outputs",
                kind,
            )
            continue
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    return turns


def _arguments(call: Mapping[str, Any]) -> Any:
    try:
        return json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return {"arguments": call.get("arguments")}


def _output_items(output: Any) -> list[dict[str, Any]]:
    if isinstance(output, str):
        return [{"text": output}]
    items: list[dict[str, Any]] = []
    for part in output or []:
        if part.get("type") == "input_text":
            items.append({"text": part.get("text", "")})
        else:
            items.append({str(part.get("type", "content")): part})
    return items


def _responses_items(messages: Sequence[Mapping[str, Any]]) -> list[Item]:
    """The Converse window as Responses input items: a user message's tool results as
    `function_call_output` items before its text; an assistant's text as messages and its
    tool uses as `function_call` items, in order. Cache points are left out: Responses has
    none."""
    items: list[Item] = []
    for message in messages:
        if message["role"] == "user":
            texts: list[dict[str, Any]] = []
            for block in message["content"]:
                if "toolResult" in block:
                    items.append(_function_call_output(block["toolResult"]))
                elif "text" in block:
                    texts.append({"type": "input_text", "text": block["text"]})
            if texts:
                items.append({"type": "message", "role": "user", "content": texts})
            continue
        for block in message["content"]:
            if "text" in block:
                items.append({"type": "message", "role": "assistant", "content": block["text"]})
            elif "toolUse" in block:
                call = block["toolUse"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["toolUseId"],
                        "name": call["name"],
                        "arguments": json.dumps(call["input"]),
                    }
                )
    return items


def _function_call_output(result: Mapping[str, Any]) -> Item:
    parts = []
    for item in result.get("content", []):
        parts.append(str(item["text"]) if "text" in item else json.dumps(item.get("json")))
    return {
        "type": "function_call_output",
        "call_id": result["toolUseId"],
        "output": "\n".join(parts),
    }


def _end_of(run_input: list[Item], given: list[Item]) -> int:
    """Where the run's input ends in the model's input: after its last occurrence (the
    SDK puts the history it read first, the new message next, then what the run adds)."""
    width = len(run_input)
    for start in range(len(given) - width, -1, -1):
        if given[start : start + width] == run_input:
            return start + width
    raise RuntimeError(
        "the run's new message is not in the model's input: another filter before "
        "ServiceSession's changed it; put yours after (session.run_config(base))"
    )


def _from_a_user_message(items: list[Item]) -> list[Item]:
    """`items` from their first user message on, so no output is cut from its call."""
    for index, item in enumerate(items):
        if _kind(item) == "user_message":
            return items[index:]
    return []


def _then(first: CallModelInputFilter, second: CallModelInputFilter) -> CallModelInputFilter:
    async def both(data: CallModelData[Any]) -> ModelInputData:
        shaped = first(data)
        if inspect.isawaitable(shaped):
            shaped = await shaped
        result = second(dataclasses.replace(data, model_data=shaped))
        if inspect.isawaitable(result):
            result = await result
        return result

    return both
