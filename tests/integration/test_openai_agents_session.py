"""The OpenAI Agents SDK adapter: `Runner.run` with a `ServiceSession` over the service.

The agent runs a scripted SDK `Model` of the project's own
(`tests/support/scripted_agents_model.py`: it answers messages or function
calls, parallel ones too, and keeps what it was given) and real
`@function_tool`s; the service is the converse handler under moto, reached
through the client's Lambda transport. Every input a model call receives is
checked by the Responses rules (`tests/support/responses_rules.py`: the openai
SDK's own item types, the pairing of calls and outputs, and a user message
first, as Bedrock needs through LiteLLM).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeVar

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, Usage, function_tool
from agents.memory import SessionSettings
from agents.result import RunResult
from agents.run_config import CallModelData, ModelInputData
from agents.testing.model import ModelStep, assistant_message, function_call
from agents.testing.model import ScriptedModel as SdkScriptedModel

from conversation_memory_client import NotFound
from conversation_memory_client.openai_agents import (
    Escalated,
    FilterNotInstalled,
    ServiceSession,
)
from local.proxy_events import LambdaContextStandIn
from tests.integration.agent_frameworks import CAP, LOOP, Service, service_for_agents
from tests.integration.conftest import Api
from tests.support.responses_rules import responses_problems
from tests.support.scripted_agents_model import (
    USAGE,
    Call,
    CallTools,
    ModelRequest,
    Say,
    ScriptedAgentsModel,
)

INSTRUCTIONS = "You are Acme's order desk. Answer briefly; look items up before you answer."
T = TypeVar("T")


@pytest.fixture
def service(make_api: Callable[..., Api]) -> Service:
    return service_for_agents(make_api)


@function_tool
def look_up(item: str) -> str:
    """Look an item up in the warehouse."""
    return f"{item}: 3 in stock"


@function_tool
def broken_scale(item: str) -> str:
    """Weigh an item (the scale is broken)."""
    raise RuntimeError(f"the scale cannot weigh {item}")


@function_tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"order {order} refunded"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def a_tool_loop(n: int = LOOP) -> list[Say | CallTools]:
    return [
        *(CallTools([Call("look_up", {"item": f"item-{i}"}, f"call_{i}")]) for i in range(n)),
        Say(f"All {n} are in stock."),
    ]


def an_agent(model: ScriptedAgentsModel, *tools: Any) -> Agent[Any]:
    return Agent(
        name="desk", instructions=INSTRUCTIONS, model=model, tools=list(tools or [look_up])
    )


def ask(agent: Agent[Any], session: ServiceSession, text: Any) -> RunResult:
    return run(Runner.run(agent, text, session=session, run_config=session.run_config(_untraced())))


def _untraced() -> RunConfig:
    return RunConfig(tracing_disabled=True)


def plain(items: Iterable[Any]) -> list[dict[str, Any]]:
    """The SDK's items (TypedDicts) as the JSON they are."""
    return [dict(item) for item in items]


def items_of(session: ServiceSession, limit: int | None = None) -> list[dict[str, Any]]:
    return plain(run(session.get_items(limit)))


def texts(items: list[dict[str, Any]]) -> list[str]:
    found = []
    for item in items:
        if item.get("type", "message") != "message":
            continue
        content = item["content"]
        found += [content] if isinstance(content, str) else [p["text"] for p in content]
    return found


def valid(call: ModelRequest) -> bool:
    return responses_problems(call.input) == []


# -- the session -------------------------------------------------------------------------------


def test_a_tool_loop_longer_than_the_window_keeps_every_model_call_valid(service: Service):
    model = ScriptedAgentsModel.playing(
        [Say("Hello! How can I help?"), *a_tool_loop(), Say("You're welcome.")]
    )
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-42")
    agent = an_agent(model)

    ask(agent, session, "Hi there")
    ask(agent, session, f"Are items 0 to {LOOP - 1} in stock?")
    ask(agent, session, "Thanks!")

    assert len(model.calls) == 1 + (LOOP + 1) + 1
    assert [responses_problems(call.input) for call in model.calls] == [[]] * len(model.calls)
    # The loop's calls see the window, then every item of the run so far.
    loop_calls = model.calls[1 : LOOP + 2]
    question_at = len(loop_calls[0].input) - 1
    for k, call in enumerate(loop_calls):
        assert texts([call.input[question_at]]) == [f"Are items 0 to {LOOP - 1} in stock?"]
        assert len(call.input) == question_at + 1 + 2 * k
        assert call.instructions == INSTRUCTIONS
    # The next run's window is bounded: the long exchange is cut to its question, a
    # marker and its newest messages, and every call in it keeps its output.
    last = model.calls[-1].input
    question, marker = texts(last[:1])
    assert question == f"Are items 0 to {LOOP - 1} in stock?"
    assert marker.endswith("messages of this exchange omitted …")
    assert texts(last[-1:]) == ["Thanks!"]
    assert sum(item.get("type") == "function_call" for item in last) < LOOP
    assert session.last is not None
    assert session.last.window is not None
    assert session.last.window.dropped > 0
    # Recorded as it happened: 3 questions, 8 calls and their 8 outputs, 3 replies.
    assert service.client.memory("acme", "c-42").counters["turnsRecorded"] == 3 + 2 * LOOP + 3


def test_the_sdks_own_session_limit_sends_an_input_that_loses_the_question():
    """SessionSettings(limit=...) on the SDK's own SQLite session, on the same loop: the
    SDK drops the output it cut from its call, but the input then starts with a function
    call, which Converse refuses through LiteLLM, and the question the loop answers is gone."""
    model = ScriptedAgentsModel.playing([*a_tool_loop(), Say("You're welcome.")])
    agent = an_agent(model)
    session = SQLiteSession("c-42", session_settings=SessionSettings(limit=CAP))

    async def both() -> None:
        await Runner.run(agent, "Are the items in stock?", session=session, run_config=_untraced())
        await Runner.run(agent, "Thanks!", session=session, run_config=_untraced())

    run(both())

    refused = [n for n, call in enumerate(model.calls) if not valid(call)]
    assert refused == [LOOP + 1]
    first = model.calls[LOOP + 1].input
    assert responses_problems(first)[0].startswith("items[0]: the conversation must start")
    assert first[0]["type"] == "function_call"
    assert "Are the items in stock?" not in texts(first)


def test_what_is_recorded_is_what_the_sdk_produced(service: Service):
    model = ScriptedAgentsModel.playing(
        [
            CallTools([Call("look_up", {"item": "tea"}, "call_tea")]),
            Say("Tea: 3 in stock."),
        ]
    )
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-9")
    result = ask(an_agent(model), session, "Is there any tea?")

    produced = plain(result.to_input_list())
    call, output, reply = produced[1:]
    exported = list(service.client.turns("acme", "c-9"))
    assert [(turn.role, turn.content) for turn in exported] == [
        ("user", [{"text": "Is there any tea?"}]),
        (
            "assistant",
            [
                {
                    "toolUse": {
                        "toolUseId": call["call_id"],
                        "name": call["name"],
                        "input": json.loads(call["arguments"]),
                    }
                }
            ],
        ),
        (
            "user",
            [
                {
                    "toolResult": {
                        "toolUseId": output["call_id"],
                        "content": [{"text": output["output"]}],
                    }
                }
            ],
        ),
        ("assistant", [{"text": reply["content"][0]["text"]}]),
    ]
    expected_usage = {
        "inputTokens": USAGE.input_tokens,
        "outputTokens": USAGE.output_tokens,
        "totalTokens": USAGE.total_tokens,
    }
    assert [turn.usage for turn in exported] == [None, expected_usage, None, expected_usage]
    # get_items answers the window and what the run added, in the SDK's own items.
    items = items_of(session)
    assert texts(items[:1]) == ["Is there any tea?"]
    assert items[1:] == [{**call, "id": call.get("id")} if "id" in call else call, output, reply]


def test_parallel_calls_are_one_turn_each_way_and_stay_paired(service: Service):
    model = ScriptedAgentsModel.playing(
        [
            CallTools(
                [
                    Call("look_up", {"item": "tea"}, "call_a"),
                    Call("look_up", {"item": "jam"}, "call_b"),
                ]
            ),
            Say("Both in stock."),
            Say("Anything else?"),
        ]
    )
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-11")
    agent = an_agent(model)
    ask(agent, session, "Tea and jam?")
    ask(agent, session, "Thanks")

    exported = list(service.client.turns("acme", "c-11"))
    assert [turn.role for turn in exported] == ["user", "assistant"] * 3
    assert [block["toolUse"]["toolUseId"] for block in exported[1].content] == ["call_a", "call_b"]
    assert [block["toolResult"]["toolUseId"] for block in exported[2].content] == [
        "call_a",
        "call_b",
    ]
    window = model.calls[-1].input
    assert responses_problems(window) == []
    kinds = [item.get("type", "message") for item in window]
    assert kinds == [
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "message",
    ]


def test_a_folds_memory_reaches_the_model_after_the_agents_instructions(service: Service):
    model = ScriptedAgentsModel.playing([Say(f"Answer {n}.") for n in range(8)])
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-7")
    agent = an_agent(model)
    for n in range(6):
        ask(agent, session, f"Question {n}: " + "about the order " * 40)
    requests = service.api.received()
    assert requests, "enough unfolded turns ask for a fold"
    compactor = service.api.compactor()
    folded = compactor.lambda_handler({"Records": requests}, LambdaContextStandIn("compactor"))
    assert folded == {"batchItemFailures": []}

    ask(agent, session, "What did we cover?")

    assert session.last is not None
    assert session.last.memory is not None
    instructions = model.calls[-1].instructions
    assert instructions is not None
    assert instructions.startswith(INSTRUCTIONS + "\n\n")
    assert instructions.endswith(session.last.memory.summary)
    assert [call.instructions for call in model.calls[:6]] == [INSTRUCTIONS] * 6
    assert agent.instructions == INSTRUCTIONS


def test_an_escalation_stops_the_model_call(service: Service):
    model = ScriptedAgentsModel.playing([Say("One."), Say("Two."), Say("never said")])
    session = ServiceSession(service.client, tenant_id="capped", contact_id="c-1")
    agent = an_agent(model)
    ask(agent, session, "first")
    ask(agent, session, "second")

    with pytest.raises(Escalated) as raised:
        ask(agent, session, "third")

    assert (raised.value.reason, raised.value.turn_count) == ("turn_cap", 3)
    assert len(model.calls) == 2
    assert service.client.memory("capped", "c-1").counters["turnsRecorded"] == 5


def test_input_the_service_cannot_store_is_refused_before_anything_is_recorded(service: Service):
    model = ScriptedAgentsModel.playing([Say("never said")])
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-3")
    message = {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
        ],
    }

    with pytest.raises(ValueError, match="not input_image"):
        ask(an_agent(model), session, [message])

    assert model.calls == []
    assert service.api.turn_items() == []


def test_a_run_without_the_sessions_filter_is_refused_before_its_answer_is_recorded(
    service: Service,
):
    model = ScriptedAgentsModel.playing([Say("Hello!")])
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-4")

    with pytest.raises(FilterNotInstalled, match=r"session\.run_config\(\)"):
        run(Runner.run(an_agent(model), "Hi", session=session, run_config=_untraced()))

    assert [turn.role for turn in service.client.turns("acme", "c-4")] == ["user"]


def test_a_filter_of_your_own_runs_after_the_sessions(service: Service):
    seen: list[int] = []

    def count_items(data: CallModelData[Any]) -> ModelInputData:
        seen.append(len(data.model_data.input))
        return ModelInputData(
            input=data.model_data.input,
            instructions=f"{data.model_data.instructions} (filtered)",
        )

    model = ScriptedAgentsModel.playing([Say("One."), Say("Two.")])
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-6")
    agent = an_agent(model)
    config = session.run_config(
        RunConfig(tracing_disabled=True, call_model_input_filter=count_items)
    )
    run(Runner.run(agent, "first", session=session, run_config=config))
    run(Runner.run(agent, "second", session=session, run_config=config))

    assert seen == [1, 3]
    assert [len(call.input) for call in model.calls] == [1, 3]
    assert model.calls[-1].instructions == f"{INSTRUCTIONS} (filtered)"


def test_a_tool_that_raises_is_recorded_as_its_error_and_the_loop_goes_on(service: Service):
    model = ScriptedAgentsModel.playing(
        [
            CallTools([Call("broken_scale", {"item": "tea"}, "call_w")]),
            Say("The scale is broken, sorry."),
            Say("Noted."),
        ]
    )
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-12")
    agent = an_agent(model, broken_scale)
    produced = plain(ask(agent, session, "How much does the tea weigh?").to_input_list())
    ask(agent, session, "OK")

    assert all(valid(call) for call in model.calls)
    # The SDK answers the call with its error message (the exception's own text is not
    # shown to the model): that answer is what is recorded.
    error = next(item for item in produced if item.get("type") == "function_call_output")
    assert "error occurred" in str(error["output"])
    exported = list(service.client.turns("acme", "c-12"))
    assert exported[2].content == [
        {"toolResult": {"toolUseId": "call_w", "content": [{"text": error["output"]}]}}
    ]
    window = model.calls[-1].input
    assert [item.get("call_id") for item in window if "call_id" in item] == ["call_w", "call_w"]


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_a_run_resumed_after_an_approval_interruption_records_each_item_once(
    service: Service, approve: bool
):
    model = ScriptedAgentsModel.playing(
        [
            CallTools([Call("refund", {"order": "A-1"}, "call_r")]),
            Say("Done." if approve else "The refund was not approved."),
            Say("Bye."),
        ]
    )
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-13")
    agent = an_agent(model, refund)

    first = ask(agent, session, "Please refund order A-1")
    assert [i.raw_item.call_id for i in first.interruptions] == ["call_r"]  # type: ignore[union-attr]
    state = first.to_state()
    for interruption in first.interruptions:
        if approve:
            state.approve(interruption)
        else:
            state.reject(interruption)
    resumed = run(
        Runner.run(agent, state, session=session, run_config=session.run_config(_untraced()))
    )
    assert resumed.final_output == ("Done." if approve else "The refund was not approved.")
    ask(agent, session, "Thanks")

    assert all(valid(call) for call in model.calls)
    exported = list(service.client.turns("acme", "c-13"))
    assert [turn.role for turn in exported] == ["user", "assistant"] * 3
    (output,) = exported[2].content
    assert output["toolResult"]["toolUseId"] == "call_r"
    said = output["toolResult"]["content"][0]["text"]
    assert ("order A-1 refunded" in said) is approve
    window = model.calls[-1].input
    assert [item.get("type", "message") for item in window] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]


def test_clear_session_erases_the_conversation(service: Service):
    model = ScriptedAgentsModel.playing([Say("Hello!"), Say("Hello again!")])
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-14")
    agent = an_agent(model)
    ask(agent, session, "Hi")

    run(session.clear_session())

    assert items_of(session) == []
    with pytest.raises(NotFound):
        service.client.memory("acme", "c-14")
    ask(agent, session, "Hi again")
    assert texts(model.calls[-1].input) == ["Hi again"]


def test_get_items_with_a_limit_starts_at_a_user_message(service: Service):
    model = ScriptedAgentsModel.playing(a_tool_loop(2))
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-15")
    ask(an_agent(model), session, "Are items 0 and 1 in stock?")

    everything = items_of(session)
    assert len(everything) == 1 + 4 + 1
    assert items_of(session, limit=len(everything)) == everything
    assert items_of(session, limit=3) == []  # no user message among the newest 3
    assert responses_problems(items_of(session, limit=6)) == []


def test_pop_item_is_refused_since_turns_are_kept_as_recorded(service: Service):
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-16")
    with pytest.raises(NotImplementedError, match="clear_session"):
        run(session.pop_item())


def test_a_streamed_run_sees_the_window_and_records_each_item_once(service: Service):
    """`Runner.run_streamed` filters the first model input before it saves the run's input:
    the session records the message in the filter, and the save finds it recorded. The
    SDK's own scripted model streams here, as a provider would."""
    usage = Usage(requests=1, input_tokens=120, output_tokens=9, total_tokens=129)
    model = SdkScriptedModel(
        [
            ModelStep(output=[assistant_message("Hello!")], usage=usage),
            ModelStep(
                output=[function_call("look_up", {"item": "tea"}, call_id="call_s")], usage=usage
            ),
            ModelStep(output=[assistant_message("Tea: 3 in stock.")], usage=usage),
        ]
    )
    session = ServiceSession(service.client, tenant_id="acme", contact_id="c-17")
    agent = an_agent(model)  # type: ignore[arg-type]

    async def streamed(text: str) -> Any:
        result = Runner.run_streamed(
            agent, text, session=session, run_config=session.run_config(_untraced())
        )
        async for _ in result.stream_events():
            pass
        return result.final_output

    assert run(streamed("Hi")) == "Hello!"
    assert run(streamed("Any tea?")) == "Tea: 3 in stock."

    inputs = [plain(call.input) for call in model.calls]
    assert [responses_problems(given) for given in inputs] == [[], [], []]
    assert texts(inputs[1]) == ["Hi", "Hello!", "Any tea?"]
    exported = list(service.client.turns("acme", "c-17"))
    assert [turn.role for turn in exported] == ["user", "assistant"] * 3
    expected = {"inputTokens": 120, "outputTokens": 9, "totalTokens": 129}
    assert [turn.usage for turn in exported] == [None, expected, None, expected, None, expected]
