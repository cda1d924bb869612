"""Warnings an operator can act on: who is affected, once an incident, never what was said.

One unanswered tool call used to be logged on every later call (14,969
repair lines in one trial session), and `FragmentRepairs` counted calls, not
incidents. A repair is now reported by the first window it appears in; every
answer's `window.repaired` still counts what its own fragment mends.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

from tests.integration.conftest import Api, iso, log_lines, minutes_ago

SECRET = "my card number is 4111 1111 1111 1111"


def path(route: str, contact: str = "c-42") -> str:
    return f"/v1/tenants/acme/contacts/{contact}/{route}"


def converse(api: Api, text: str, *, contact: str = "c-42", **message: Any) -> dict[str, Any]:
    status, answer = api.request(
        "POST", path("converse", contact), {"message": {"text": text, **message}}
    )
    assert status == 200, answer
    return dict(answer)


def record(api: Api, body: dict[str, Any], contact: str = "c-42") -> None:
    status, answer = api.request("POST", path("turns", contact), body)
    assert status == 201, answer


def call(tool_use_id: str) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": tool_use_id, "name": "lookup", "input": {"q": SECRET}}}


def repair_lines(logs: io.StringIO) -> list[dict[str, Any]]:
    return [
        r for r in log_lines(logs.getvalue()) if r.get("message") == "converse_fragment_repaired"
    ]


def repairs_counted(capsys: Any) -> float:
    """`FragmentRepairs` summed over the metrics printed (one EMF document an invocation)."""
    printed = log_lines(capsys.readouterr().out)
    return sum(sum(r.get("FragmentRepairs", [])) for r in printed if "_aws" in r)


def test_an_unanswered_call_is_one_incident_over_every_later_window(
    api: Api, logs: io.StringIO, capsys: Any
) -> None:
    converse(api, SECRET)
    record(api, {"role": "assistant", "content": [call("call:1")]})
    answers = [converse(api, f"still there? {n}") for n in range(7)]
    assert all(answer["window"]["repaired"] == 1 for answer in answers)
    (line,) = repair_lines(logs)
    assert line["level"] == "WARNING"
    assert (line["repair"], line["toolUseId"]) == ("missing_tool_result", "call:1")
    assert (line["tenant"], line["contact"]) == ("acme", "c-42")
    assert repairs_counted(capsys) == 1
    assert SECRET not in logs.getvalue()


def test_each_new_repair_is_reported_once_beside_an_old_one(
    api: Api, logs: io.StringIO, capsys: Any
) -> None:
    converse(api, "first question")
    record(api, {"role": "assistant", "content": [call("call:1")]})
    converse(api, "second question")
    converse(api, "third question")
    record(api, {"role": "assistant", "content": [call("call:2")]})
    answer = converse(api, "fourth question")
    converse(api, "fifth question")
    assert answer["window"]["repaired"] == 2
    assert [line["toolUseId"] for line in repair_lines(logs)] == ["call:1", "call:2"]
    assert repairs_counted(capsys) == 2


def test_a_result_filed_late_into_an_old_exchange_is_reported_by_the_next_window(
    api: Api, logs: io.StringIO
) -> None:
    start = minutes_ago(30)
    converse(api, "q1", sentAt=iso(start))
    record(api, {"role": "assistant", "text": "a1", "sentAt": iso(start + timedelta(minutes=1))})
    converse(api, "q2", sentAt=iso(start + timedelta(minutes=5)))
    assert repair_lines(logs) == []
    # Recorded now, placed before q2: a result nobody asked for, in an exchange shown before.
    ghost = {"toolResult": {"toolUseId": "ghost", "content": [{"text": "?"}]}}
    record(api, {"role": "user", "content": [ghost], "sentAt": iso(start + timedelta(minutes=2))})
    converse(api, "q3")
    converse(api, "q4")
    lines = repair_lines(logs)
    assert [(line["repair"], line["toolUseId"]) for line in lines] == [
        ("orphan_tool_result", "ghost")
    ]


def test_a_retried_message_reports_nothing_again(api: Api, logs: io.StringIO) -> None:
    converse(api, "q1")
    record(api, {"role": "assistant", "content": [call("call:1")]})
    first = converse(api, "q2", id="m-2")
    again = converse(api, "q2", id="m-2")
    assert again == first
    assert len(repair_lines(logs)) == 1


def test_each_conversation_reports_its_own(api: Api, logs: io.StringIO) -> None:
    for contact in ("c-1", "c-2"):
        converse(api, "q1", contact=contact)
        record(api, {"role": "assistant", "content": [call("call:1")]}, contact=contact)
        converse(api, "q2", contact=contact)
        converse(api, "q3", contact=contact)
    assert [line["contact"] for line in repair_lines(logs)] == ["c-1", "c-2"]


def test_a_coverage_gap_names_the_conversation_and_no_content(
    api: Api, logs: io.StringIO, capsys: Any
) -> None:
    start = minutes_ago(80)
    for n in range(30):
        api.converse(f"{SECRET} q{n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n))
        api.reply(f"{SECRET} a{n}", tenant="roomy", sent_at=start + timedelta(minutes=2 * n + 1))
    api.converse("no compactor has run", tenant="roomy")
    output = logs.getvalue() + capsys.readouterr().out
    gaps = [r for r in log_lines(output) if r.get("message") == "converse_history_coverage_gap"]
    assert gaps
    assert all((gap["tenant"], gap["contact"]) == ("roomy", "c1") for gap in gaps)
    assert SECRET not in output
