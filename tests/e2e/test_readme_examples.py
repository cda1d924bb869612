"""The README's "Use it from your agent" and "Your users' data" examples, run as written
against the local runner.

Each example is read from the README (the code block after its
`<!-- example: NAME -->` marker) and run with the names a reader supplies:
the runner's URL, the client's scripted model for Strands, the tests' scripted
chat model for LangChain (each call converted to Converse by langchain-aws and
checked against Bedrock's rules) and scripted SDK model for the OpenAI Agents
SDK (each input checked by the Responses rules), a stubbed Bedrock for boto3
(botocore still validates the request against Converse's input shape, and the
fragment is checked against Bedrock's other rules). The local
example is complete as written: it runs with only its URL moved to the
runner's port, and with no AWS configuration at all. The data examples' curl
session runs with curl, each answer compared with the one the README shows
(ids, times and cursors aside), and the client example prints what the README
says it prints. So the examples cannot rot.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped, unused-ignore]
import pytest
from agents import function_tool
from botocore.stub import Stubber  # type: ignore[import-untyped, unused-ignore]
from langchain_aws.chat_models.bedrock_converse import _messages_to_bedrock
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool as langchain_tool

from conversation_memory_client.scripted import Say, ScriptedModel, UseTool
from tests.e2e.runner_process import REPO_ROOT, Runner, StartRunner
from tests.support.converse_validator import converse_problems
from tests.support.no_aws_configuration import clear_aws_configuration
from tests.support.responses_rules import responses_problems
from tests.support.scripted_agents_model import Call, CallTools, ScriptedAgentsModel
from tests.support.scripted_agents_model import Say as SayThis
from tests.support.scripted_chat_model import CallTools as ChatCallTools
from tests.support.scripted_chat_model import Say as ChatSay
from tests.support.scripted_chat_model import ScriptedChatModel
from tests.support.strands_tools import look_up

README = REPO_ROOT / "README.md"
CLIENT_README = REPO_ROOT / "client" / "README.md"


def example(name: str, readme: Path = README) -> str:
    text = readme.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert found, f"the README has no example {name!r}"
    return found.group(1)


def run_example(name: str, **names: Any) -> Callable[..., str]:
    """The example's `answer`, defined by running the example with the reader's names."""
    namespace: dict[str, Any] = {"__name__": f"readme_{name}", **names}
    exec(compile(example(name), f"README.md ({name})", "exec"), namespace)
    answer: Callable[..., str] = namespace["answer"]
    return answer


@pytest.fixture
def signed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and a Region for SigV4, as a reader's environment would give them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def hand_over(contact_id: str, reason: str | None) -> str:
    return f"handed over: {reason}"


def recorded_turns(runner: Runner, contact: str) -> int:
    status, _, body = runner.request("GET", f"/v1/tenants/acme-legal/contacts/{contact}/memory")
    assert status == 200, body
    return int(body["counters"]["turnsRecorded"])


@pytest.mark.usefixtures("signed")
def test_the_strands_example_answers_through_the_service(shared_runner: Runner):
    model = ScriptedModel(
        [UseTool("look_up", {"item": "clause 7"}, "call:1"), Say("Clause 7 is still in force.")]
    )
    answer = run_example(
        "strands",
        API_URL=shared_runner.base_url,
        MODEL=model,
        PROMPT="You answer questions about the client's contract.",
        TOOLS=[look_up],
        hand_over=hand_over,
    )
    contact = f"readme-{uuid.uuid4().hex[:10]}"
    assert answer(contact, "Is clause 7 still in force?") == "Clause 7 is still in force.\n"
    assert [
        problems
        for call in model.calls
        if (problems := converse_problems({"system": call.system, "messages": call.messages}))
    ] == []
    assert model.calls[0].system[0] == {"text": "You answer questions about the client's contract."}
    assert recorded_turns(shared_runner, contact) == 4  # question, tool call, result, reply


@pytest.mark.usefixtures("signed")
def test_the_langchain_example_answers_through_the_service(shared_runner: Runner):
    model = ScriptedChatModel(
        script=[
            ChatCallTools(("look_up_clause", {"clause": "7"}, "call_1")),
            ChatSay("Clause 7 is still in force."),
            ChatSay("Clause 8 was struck out."),
        ]
    )
    prompt = "You answer questions about the client's contract."
    answer = run_example(
        "langchain",
        API_URL=shared_runner.base_url,
        MODEL=model,
        PROMPT=prompt,
        TOOLS=[langchain_tool(look_up_clause_text)],
        hand_over=hand_over,
    )
    contact = f"readme-{uuid.uuid4().hex[:10]}"
    assert answer(contact, "Is clause 7 still in force?") == "Clause 7 is still in force."
    assert answer(contact, "And clause 8?") == "Clause 8 was struck out."

    # Each call through langchain-aws's own conversion to Converse, then Bedrock's rules.
    fragments = [_messages_to_bedrock(list(call.messages)) for call in model.calls]
    assert [converse_problems({"messages": messages}) for messages, _ in fragments] == [[]] * 3
    assert [call.system for call in model.calls] == [SystemMessage(prompt)] * 3
    # A new agent for the second message: its history came from the service.
    first, *_ = model.calls[-1].messages
    assert first.text == "Is clause 7 still in force?"
    # question, call, result, reply; question, reply
    assert recorded_turns(shared_runner, contact) == 6


def look_up_clause_text(clause: str) -> str:
    """Look a clause of the contract up."""
    return f"clause {clause}: in force since 2024"


@function_tool
def look_up_clause(clause: str) -> str:
    """Look a clause of the contract up."""
    return f"clause {clause}: in force since 2024"


@pytest.mark.usefixtures("signed")
def test_the_openai_agents_example_answers_through_the_service(
    shared_runner: Runner, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # as the README says off OpenAI
    model = ScriptedAgentsModel.playing(
        [
            CallTools([Call("look_up_clause", {"clause": "7"}, "call_1")]),
            SayThis("Clause 7 is still in force."),
            SayThis("Clause 8 was struck out."),
        ]
    )
    answer: Callable[..., Any] = run_example(
        "openai-agents",
        API_URL=shared_runner.base_url,
        MODEL=model,
        PROMPT="You answer questions about the client's contract.",
        TOOLS=[look_up_clause],
        hand_over=hand_over,
    )
    contact = f"readme-{uuid.uuid4().hex[:10]}"
    assert asyncio.run(answer(contact, "Is clause 7 still in force?")) == (
        "Clause 7 is still in force."
    )
    assert asyncio.run(answer(contact, "And clause 8?")) == "Clause 8 was struck out."

    assert [responses_problems(call.input) for call in model.calls] == [[], [], []]
    assert {call.instructions for call in model.calls} == {
        "You answer questions about the client's contract."
    }
    # A new session object for the second message: its window comes from the service.
    first_question = model.calls[-1].input[0]
    assert first_question["content"] == [
        {"type": "input_text", "text": "Is clause 7 still in force?"}
    ]
    # question, call, result, reply; question, reply
    assert recorded_turns(shared_runner, contact) == 6


def test_the_local_example_runs_as_written_with_no_aws_account(
    shared_runner: Runner,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    clear_aws_configuration(monkeypatch, tmp_path)
    code = example("local")
    assert 'MemoryClient.over_http("http://127.0.0.1:8000")' in code, "make run's own URL"
    namespace: dict[str, Any] = {"__name__": "readme_local"}

    code = code.replace("http://127.0.0.1:8000", shared_runner.base_url)
    exec(compile(code, "README.md (local)", "exec"), namespace)

    answer, counters = [line for line in capsys.readouterr().out.splitlines() if line]
    assert answer == "Yes, clause 7 is in force."
    assert "'turnsRecorded': 4" in counters
    first, second = namespace["model"].calls
    assert first.tool_names == ["look_up"]
    result = second.messages[-1]["content"][0]["toolResult"]
    assert result["content"] == [{"text": "clause 7: in force since 2024"}]
    assert [
        converse_problems({"system": c.system, "messages": c.messages}) for c in (first, second)
    ] == [[], []]


def test_the_clients_own_readme_example_runs_against_the_runner_with_no_aws_account(
    shared_runner: Runner,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    clear_aws_configuration(monkeypatch, tmp_path)
    code = example("scripted", CLIENT_README)
    assert 'MemoryClient.over_http("http://127.0.0.1:8000")' in code
    namespace: dict[str, Any] = {"__name__": "client_readme_scripted"}

    code = code.replace("http://127.0.0.1:8000", shared_runner.base_url)
    exec(compile(code, "client/README.md (scripted)", "exec"), namespace)

    assert capsys.readouterr().out.startswith("Tea is in stock.\n")
    last = namespace["model"].calls[-1].messages
    assert last[-2]["content"][0]["toolUse"]["input"] == {"item": "tea"}
    assert last[-1]["content"][0]["toolResult"]["content"] == [{"text": "tea: 3 in stock"}]


@pytest.mark.usefixtures("signed")
def test_the_boto3_example_sends_the_fragment_to_bedrock_as_is(
    shared_runner: Runner, monkeypatch: pytest.MonkeyPatch
):
    bedrock = boto3.client("bedrock-runtime", region_name="us-east-1")
    stub = Stubber(bedrock)
    sent: list[dict[str, Any]] = []
    bedrock.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse", lambda params, **_: sent.append(params)
    )
    for reply in ("Yes, it is.", "Clause 8 was struck out."):
        stub.add_response(
            "converse",
            {
                "output": {"message": {"role": "assistant", "content": [{"text": reply}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 120, "outputTokens": 8, "totalTokens": 128},
                "metrics": {"latencyMs": 300},
            },
        )
    real_client = boto3.client
    monkeypatch.setattr(
        boto3,
        "client",
        lambda service, *a, **k: (
            bedrock if service == "bedrock-runtime" else real_client(service, *a, **k)
        ),
    )
    answer = run_example(
        "boto3",
        API_URL=shared_runner.base_url,
        MODEL_ID="amazon.nova-lite-v1:0",
        hand_over=hand_over,
    )
    contact = f"readme-{uuid.uuid4().hex[:10]}"
    with stub:  # botocore validates each request against Converse's input shape
        assert answer(contact, "Is clause 7 still in force?") == "Yes, it is."
        assert answer(contact, "And clause 8?") == "Clause 8 was struck out."
    assert [converse_problems({k: v for k, v in p.items() if k != "modelId"}) for p in sent] == [
        [],
        [],
    ]
    second = sent[1]["messages"]
    assert second[0]["content"][0]["text"] == "Is clause 7 still in force?"
    assert second[1]["content"][0]["text"] == "Yes, it is."
    assert recorded_turns(shared_runner, contact) == 4


# "Your users' data": the curl session and the client example, on a runner of their own,
# so that the tenant's listing holds only what they store.

QUICKSTART_ALICE = [
    ("converse", {"message": {"text": "What are your opening hours?"}}),
    ("turns", {"role": "assistant", "text": "We are open 9:00 to 17:00, Monday to Friday."}),
    ("converse", {"message": {"text": "And on Saturdays?"}}),
]
"""Alice's conversation as the quickstart's curl session holds it."""

VOLATILE = frozenset({"id", "sentAt", "recordedAt", "lastMessageAt", "erasedAt", "nextCursor"})
"""Members that differ on every run: ids drawn by the service, times, and cursors."""


def console_session(name: str) -> list[tuple[str, str]]:
    """The example's commands (`$ ...`, with its continuation lines), each with its output."""
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {name} -->\n```console\n(.*?)```", text, re.S)
    assert found, f"the README has no console example {name!r}"
    session: list[tuple[str, str]] = []
    for chunk in re.split(r"^\$ ", found.group(1), flags=re.M)[1:]:
        lines = chunk.splitlines()
        command = [lines.pop(0)]
        while command[-1].endswith("\\"):
            command.append(lines.pop(0))
        session.append(("\n".join(command), "\n".join(lines).strip()))
    return session


def printed_by(name: str) -> list[str]:
    """The lines the README says the example prints: the `text` block after it."""
    text = README.read_text(encoding="utf-8")
    found = re.search(
        rf"<!-- example: {name} -->\n```python\n.*?```.*?```text\n(.*?)```", text, re.S
    )
    assert found, f"the README shows no output for the example {name!r}"
    return found.group(1).splitlines()


def steady(value: Any) -> Any:
    """The JSON with what differs on every run (see VOLATILE) replaced by a mark."""
    if isinstance(value, dict):
        return {
            k: "<varies>" if k in VOLATILE and isinstance(v, str) else steady(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def test_the_data_examples_run_as_written_against_make_runs_runner(
    start_runner: StartRunner,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
):
    if shutil.which("curl") is None or shutil.which("bash") is None:
        pytest.skip("the curl session needs curl and bash")
    runner = start_runner()
    for route, body in QUICKSTART_ALICE:
        status, _, answer = runner.request("POST", f"/v1/tenants/demo/contacts/alice/{route}", body)
        assert status in (200, 201), answer

    cursors: dict[str, str] = {}  # the README's cursor -> the one this run was given
    for written, shown in console_session("data-curl"):
        assert written.startswith("curl "), written
        assert "http://127.0.0.1:8000/" in written, "make run's own URL"
        command = written.replace("http://127.0.0.1:8000", runner.base_url)
        for readme_cursor, cursor in cursors.items():
            command = command.replace(readme_cursor, cursor)
        ran = subprocess.run(
            ["bash", "-c", command], capture_output=True, text=True, timeout=30, check=True
        )
        answered, expected = json.loads(ran.stdout), json.loads(shown)
        assert steady(answered) == steady(expected), written
        if isinstance(expected, dict) and expected.get("nextCursor"):
            cursors[expected["nextCursor"]] = answered["nextCursor"]

    clear_aws_configuration(monkeypatch, tmp_path)
    code = example("data")
    assert 'MemoryClient.over_http("http://127.0.0.1:8000")' in code, "make run's own URL"
    code = code.replace("http://127.0.0.1:8000", runner.base_url)
    capsys.readouterr()
    exec(compile(code, "README.md (data)", "exec"), {"__name__": "readme_data"})

    assert capsys.readouterr().out.splitlines() == printed_by("data")
