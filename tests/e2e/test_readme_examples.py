"""The README's "Use it from your agent" examples, run as written against the local runner.

Each example is read from the README (the code block after its
`<!-- example: NAME -->` marker) and run with the names a reader supplies:
the runner's URL, the client's scripted model for Strands, a stubbed Bedrock
for boto3 (botocore still validates the request against Converse's input
shape, and the fragment is checked against Bedrock's other rules). The local
example is complete as written: it runs with only its URL moved to the
runner's port, and with no AWS configuration at all. So the examples cannot rot.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped, unused-ignore]
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped, unused-ignore]

from conversation_memory_client.scripted import Say, ScriptedModel, UseTool
from tests.e2e.runner_process import REPO_ROOT, Runner
from tests.support.converse_validator import converse_problems
from tests.support.no_aws_configuration import clear_aws_configuration
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
