"""Random tool-heavy conversations, as an agent records them through the API.

Every shape the API admits, drawn as a sequence of recorded messages:
questions through `/converse` (text, sometimes with the results of pending
calls, text before, between or after them), replies through `/turns` (text,
tool calls with text before, between and after them, parallel calls, a call
alone, several texts), tool results through `/turns` (for every pending
call, some, none, an id nobody asked for, the same id twice), long tool
loops, same-role runs, oversized inputs and results, ids in every form
Converse takes (`call:abc`, `functions.get_weather:0`), Latin, CJK and emoji
text. The same draws feed the domain's properties (as `Turn`s), the
handler's (through the API) and the end-to-end suite (over HTTP).

Block orders, every one the API admits (`api_models.py`: a reply holds text
and tool calls in any order, never a result; the contact's message holds at
least one text and any results in any order; a `user` turn recorded through
`/turns` holds results only):

- `assistant`: `[text]`, `[text, text]`, `[toolUse]`, `[toolUse, toolUse]`
  (parallel calls), `[text, toolUse]` (the usual reply), `[toolUse, text]`,
  `[text, toolUse, toolUse, text]`, `[toolUse, text, toolUse]`, ...
  (`replies`);
- `user` through `/converse`: `[text]`, `[text, text]`, `[text, toolResult]`,
  `[toolResult, text]`, `[toolResult, toolResult, text]`,
  `[toolResult, text, toolResult]`, ... (`contact_messages`; in a
  conversation, when calls are pending, often right after them);
- `user` through `/turns`: `[toolResult]`, `[toolResult, toolResult]`, ...

A message whose first block is a text followed by tool blocks matters: a
reader that judged it by its first block alone would take a contact's
`[text, toolResult]` for a question and a reply's `[text, toolUse]` for its
text alone (tests/unit/test_block_orders.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from memory_core.turns import Role, Turn

Route = Literal["converse", "record"]

SIZES = st.one_of(
    st.integers(1, 80), st.integers(80, 1500), st.integers(1500, 6000), st.integers(6000, 20_000)
)
ID_FORMS = ("tooluse_{}", "call:{}", "functions.get_weather:{}", "t-{}", "{}")
LETTERS = ("a", "z", "条", "é", "😀", " a")


def through_the_api(share: int) -> settings:
    """Settings for a property that records each draw through the API: `1/share` of the
    profile's examples (each costs many requests), the fixture reused across examples."""
    return settings(
        max_examples=max(1, settings().max_examples // share),
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


@dataclass(frozen=True)
class Recorded:
    """One message as the agent records it: the route, the role and the Converse content."""

    route: Route
    role: Role
    content: list[dict[str, Any]]
    gap: timedelta
    """Time since the message before (the first one: since the conversation began)."""

    def body(self) -> dict[str, Any]:
        if self.route == "converse":
            return {"message": {"content": self.content}}
        return {"role": self.role, "content": self.content}


def _text(draw: st.DrawFn, sizes: st.SearchStrategy[int] = SIZES) -> dict[str, Any]:
    letter = draw(st.sampled_from(LETTERS))
    size = draw(sizes)
    return {"text": ("x" + letter * size)[: max(1, size)]}


class _Calls:
    """Tool ids in every form Converse takes; now and then an id used before."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.issued: list[str] = []

    def new_id(self) -> str:
        if self.issued and self.draw(st.integers(0, 9)) == 0:
            return self.draw(st.sampled_from(self.issued))
        form = self.draw(st.sampled_from(ID_FORMS))
        tool_use_id = form.format(len(self.issued))
        self.issued.append(tool_use_id)
        return tool_use_id


def _tool_use(draw: st.DrawFn, tool_use_id: str, sizes: st.SearchStrategy[int]) -> dict[str, Any]:
    body = _text(draw, sizes)["text"]
    shape = draw(st.sampled_from(["flat", "nested", "empty"]))
    tool_input: dict[str, Any] = {
        "flat": {"query": body},
        "nested": {"filters": [{"field": "clause", "value": body}, 7, None, True]},
        "empty": {},
    }[shape]
    name = draw(st.sampled_from(["get_weather", "search", "lookup-clause", "x"]))
    return {"toolUse": {"toolUseId": tool_use_id, "name": name, "input": tool_input}}


def _tool_result(
    draw: st.DrawFn, tool_use_id: str, sizes: st.SearchStrategy[int]
) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            items.append(_text(draw, sizes))
        else:
            items.append({"json": {"rows": [_text(draw, sizes)["text"]], "count": 1}})
    result: dict[str, Any] = {"toolUseId": tool_use_id, "content": items}
    status = draw(st.sampled_from([None, "success", "error"]))
    if status:
        result["status"] = status
    return {"toolResult": result}


def _results(
    draw: st.DrawFn, calls: _Calls, pending: list[str], sizes: st.SearchStrategy[int]
) -> list[dict[str, Any]]:
    """Results for the pending calls: all, some or none; an unknown id; a repeat."""
    answered = [c for c in pending if draw(st.integers(0, 5)) > 0]
    if draw(st.integers(0, 7)) == 0:
        answered.append(calls.new_id())  # a result for an id nobody asked for
    if answered and draw(st.integers(0, 9)) == 0:
        answered.append(answered[0])  # the same result twice
    blocks = [_tool_result(draw, tool_use_id, sizes) for tool_use_id in answered]
    return draw(st.permutations(blocks)) if blocks else []


@st.composite
def replies(
    draw: st.DrawFn, tool_use_ids: list[str], sizes: st.SearchStrategy[int] = SIZES
) -> list[dict[str, Any]]:
    """A reply as `/turns` takes it: a call for each id, in order, and texts anywhere.

    Texts go before the first call (the usual `[text, toolUse]`), between calls
    and after the last, one or two in a place; with no ids, one text or two.
    Never empty.
    """
    calls = [_tool_use(draw, tool_use_id, sizes) for tool_use_id in tool_use_ids]
    if not calls:
        return [_text(draw, sizes) for _ in range(1 if draw(st.integers(0, 15)) else 2)]

    def texts(one_in: int) -> list[dict[str, Any]]:
        if draw(st.integers(0, one_in - 1)):
            return []
        return [_text(draw, sizes) for _ in range(1 if draw(st.integers(0, 5)) else 2)]

    content = texts(3)  # before the first call
    for index, call in enumerate(calls):
        if index:
            content += texts(6)  # between two calls
        content.append(call)
    return content + texts(5)  # after the last call


@st.composite
def tool_conversations(
    draw: st.DrawFn,
    *,
    max_exchanges: int = 8,
    sizes: st.SearchStrategy[int] = SIZES,
    long_gaps: bool = False,
) -> list[Recorded]:
    """A conversation as recorded, oldest first; never empty, ending on anything."""
    calls = _Calls(draw)
    recorded: list[Recorded] = []
    pending: list[str] = []

    def gap() -> timedelta:
        if long_gaps and draw(st.integers(0, 9)) == 0:
            return timedelta(days=draw(st.integers(1, 40)))
        return timedelta(seconds=draw(st.integers(1, 600)))

    def contact_message(returns_results: bool | None = None) -> None:
        """The contact writes; with pending calls, its message may carry their results."""
        nonlocal pending
        texts = [_text(draw, sizes) for _ in range(draw(st.integers(1, 2)))]
        if returns_results is None:
            returns_results = bool(pending) and draw(st.booleans())
        results = _results(draw, calls, pending, sizes) if returns_results and pending else []
        content = draw(st.permutations([*texts, *results]))
        recorded.append(Recorded("converse", "user", list(content), gap()))
        if results:
            pending = []

    for _ in range(draw(st.integers(0, 2))):  # the agent speaks first (a greeting, a template)
        recorded.append(Recorded("record", "assistant", [_text(draw, sizes)], gap()))
    for _ in range(draw(st.integers(0 if recorded else 1, max_exchanges))):
        contact_message()
        long_loop = draw(st.integers(0, 5)) == 0
        steps = draw(st.integers(10, 40)) if long_loop else draw(st.integers(0, 5))
        for _ in range(steps):
            kind = draw(
                st.sampled_from(["answer", "calls", "calls", "results", "question", "answer"])
            )
            if kind == "answer":
                content = draw(replies([], sizes))
                recorded.append(Recorded("record", "assistant", content, gap()))
            elif kind == "calls":
                ids = [calls.new_id() for _ in range(draw(st.integers(1, 3)))]
                content = draw(replies(ids, sizes))
                recorded.append(Recorded("record", "assistant", content, gap()))
                pending = ids
                then = draw(st.integers(0, 5))
                if then > 1:  # usually the results follow at once
                    results = _results(draw, calls, pending, sizes)
                    if results:
                        recorded.append(Recorded("record", "user", results, gap()))
                    pending = []
                elif then == 1:  # the contact writes next, the results beside its text
                    contact_message(returns_results=True)
                # else the calls stay pending: a later message answers them, or none does
            elif kind == "results":
                results = _results(draw, calls, pending, sizes)
                if results:
                    recorded.append(Recorded("record", "user", results, gap()))
                pending = []
            else:
                contact_message()
    return recorded


@st.composite
def contact_messages(draw: st.DrawFn, pending: list[str]) -> list[dict[str, Any]]:
    """The current message: text, and perhaps results for `pending` or unknown ids, any order.

    `[text, toolResult]`, `[toolResult, text]`, `[toolResult, text, toolResult]`, ...:
    a contact's message in every order `/converse` takes.
    """
    calls = _Calls(draw)
    texts = [_text(draw) for _ in range(draw(st.integers(1, 2)))]
    results = _results(draw, calls, pending, SIZES) if draw(st.booleans()) else []
    blocks: list[dict[str, Any]] = draw(st.permutations([*texts, *results]))
    return blocks


@st.composite
def returned_results(
    draw: st.DrawFn, pending: list[str], sizes: st.SearchStrategy[int] = SIZES
) -> list[dict[str, Any]]:
    """A `user` turn recorded through `/turns`: tool results only, any order, never empty.

    Results for `pending` (all, some), an unknown id, the same id twice, like the
    results in a conversation; an unknown id's alone when none was drawn.
    """
    calls = _Calls(draw)
    blocks = _results(draw, calls, pending, sizes)
    return blocks or [_tool_result(draw, calls.new_id(), sizes)]


def pending_calls(recorded: list[Recorded]) -> list[str]:
    """The calls of the newest assistant message, when nothing has answered them since."""
    for message in reversed(recorded):
        if message.role == "assistant":
            return [b["toolUse"]["toolUseId"] for b in message.content if "toolUse" in b]
        if any("toolResult" in b for b in message.content):
            return []
    return []


def as_turns(recorded: list[Recorded], start: datetime) -> list[Turn]:
    turns: list[Turn] = []
    sent_at = start
    for index, message in enumerate(recorded):
        sent_at += message.gap
        turns.append(Turn(f"m{index:04d}", message.role, message.content, sent_at, sent_at))
    return turns
