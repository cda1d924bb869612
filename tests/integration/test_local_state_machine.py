"""The offline Step Functions harness, on small hand-written definitions.

Each test pins one thing a workflow test relies on: that data flows as Step Functions
moves it, that Retry and Catch match error names exactly, that retries are instant, and
where aws-local-stepfunctions differs from the service.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from tests.support.local_state_machine import (
    STATE_PAYLOAD_LIMIT,
    StateMachineRunnerError,
    TaskFailed,
    definition_from_template,
    json_size,
    run_state_machine,
)

LAMBDA_ARN = "arn:aws:lambda:us-east-1:123456789012:function:Work"
CONVERSE_ARN = "arn:aws:states:::aws-sdk:bedrockruntime:converse"
THROTTLED = "BedrockRuntime.ThrottlingException"
INVALID = "BedrockRuntime.ValidationException"
# An hour between retries: a run that honoured it would blow the runner's timeout below,
# so these tests also prove that retries are made instant.
SLOW_RETRY = {"IntervalSeconds": 3600, "BackoffRate": 2, "MaxAttempts": 2}
QUICK = 15.0


def one_task(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "StartAt": "Work",
        "States": {"Work": {"Type": "Task", "Resource": LAMBDA_ARN, **state}},
    }


def ask_the_model(**fields: Any) -> dict[str, Any]:
    """Bedrock Converse with the workflow's retry and catch shape: throttles retried, all
    errors caught into a Fail state that reports the caught error and cause."""
    return {
        "StartAt": "AskTheModel",
        "States": {
            "AskTheModel": {
                "Type": "Task",
                "Resource": CONVERSE_ARN,
                "Retry": [{"ErrorEquals": [THROTTLED], **SLOW_RETRY}],
                "Catch": [
                    {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Failed"}
                ],
                "ResultPath": "$.model",
                "End": True,
                **fields,
            },
            "Failed": {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"},
        },
    }


def converse_output(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"Output": {"Message": {"Role": "assistant", "Content": list(blocks)}}}


def test_a_task_state_answers_with_its_callables_result():
    execution = run_state_machine(
        one_task({"End": True}),
        {"n": 1},
        {"Work": lambda task_input: {"doubled": task_input["n"] * 2}},
    )

    assert execution.status == "SUCCEEDED"
    assert execution.output == {"doubled": 2}
    assert execution.states_entered() == ["Work"]
    assert execution.attempts("Work") == 1
    assert execution.task_exceptions == ()


def test_parameters_result_selector_and_result_path_move_data_as_step_functions_does():
    seen: list[Any] = []

    def work(task_input: Any) -> dict[str, Any]:
        seen.append(task_input)
        return {"Payload": {"value": task_input["name"].upper(), "noise": "x" * 10}}

    definition = one_task(
        {
            "Parameters": {"name.$": "$.who.name", "fixed": 7, "first.$": "$$.Execution.Input.who"},
            "ResultSelector": {"value.$": "$.Payload.value"},
            "ResultPath": "$.work",
            "End": True,
        }
    )
    execution = run_state_machine(
        definition, {"who": {"name": "ada"}, "keep": True}, {"Work": work}
    )

    assert seen == [{"name": "ada", "fixed": 7, "first": {"name": "ada"}}]
    assert execution.output == {"who": {"name": "ada"}, "keep": True, "work": {"value": "ADA"}}


def test_result_path_dollar_replaces_the_input_with_the_result():
    # The library alone would store the result under a key named "$"; the runner corrects it.
    execution = run_state_machine(
        one_task({"ResultPath": "$", "End": True}), {"dropped": 1}, {"Work": lambda _: {"kept": 2}}
    )

    assert execution.output == {"kept": 2}


def test_a_retry_matches_the_exact_error_name_and_runs_instantly():
    answers: list[Any] = [TaskFailed(THROTTLED, "slow down"), converse_output({"Text": "hi"})]

    def model(_: Any) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    execution = run_state_machine(
        ask_the_model(ResultSelector={"text.$": "$.Output.Message.Content[0].Text"}),
        {},
        {"AskTheModel": model},
        timeout=QUICK,
    )

    assert execution.status == "SUCCEEDED"
    assert execution.output == {"model": {"text": "hi"}}
    assert execution.attempts("AskTheModel") == 2
    retried = [e for e in execution.events if e["type"] == "StateRetried"]
    assert [(e["state"], e["retry"]["attempt"]) for e in retried] == [("AskTheModel", 1)]
    failed = [e for e in execution.events if e["type"] == "StateFailed"]
    assert [(e["error"], e["cause"]) for e in failed] == [(THROTTLED, "slow down")]


def test_retries_run_out_then_the_catch_reports_the_last_error():
    def always_throttled(_: Any) -> Any:
        raise TaskFailed(THROTTLED, "still busy")

    execution = run_state_machine(
        ask_the_model(), {}, {"AskTheModel": always_throttled}, timeout=QUICK
    )

    assert execution.attempts("AskTheModel") == 1 + SLOW_RETRY["MaxAttempts"]
    assert (execution.status, execution.error, execution.cause) == (
        "FAILED",
        THROTTLED,
        "still busy",
    )


def test_another_error_name_is_not_retried_but_caught_into_a_fail_with_error_and_cause_paths():
    def rejected(_: Any) -> Any:
        raise TaskFailed(INVALID, "messages must alternate")

    execution = run_state_machine(ask_the_model(), {"contactId": "c1"}, {"AskTheModel": rejected})

    assert execution.attempts("AskTheModel") == 1
    assert execution.states_entered() == ["AskTheModel", "Failed"]
    assert execution.status == "FAILED"
    # The real error and cause, not a Fail state's fixed text.
    assert (execution.error, execution.cause) == (INVALID, "messages must alternate")
    caught = [e for e in execution.events if e["type"] == "StateCaught"]
    assert [e["state"] for e in caught] == ["AskTheModel"]
    entered_failed = [e for e in execution.events if e["type"] == "StateEntered"][-1]
    assert entered_failed["input"] == {
        "contactId": "c1",
        "error": {"Error": INVALID, "Cause": "messages must alternate"},
    }


def test_a_bug_in_a_task_callable_fails_the_task_and_is_kept_with_its_traceback():
    def broken(task_input: Any) -> Any:
        return task_input["missing"]

    execution = run_state_machine(one_task({"End": True}), {}, {"Work": broken})

    assert (execution.status, execution.error, execution.cause) == (
        "FAILED",
        "KeyError",
        "'missing'",
    )
    (kept,) = execution.task_exceptions
    assert "Traceback" in kept
    assert 'task_input["missing"]' in kept


def test_a_task_state_without_a_callable_ends_the_execution_past_retry_and_catch():
    definition = one_task(
        {
            "Retry": [{"ErrorEquals": ["States.ALL"], **SLOW_RETRY}],
            "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Recovered"}],
            "End": True,
        }
    )
    definition["States"]["Recovered"] = {"Type": "Succeed"}

    execution = run_state_machine(definition, {}, {}, timeout=QUICK)

    assert (execution.status, execution.error) == ("FAILED", "LocalHarness.Error")
    assert "Work" in execution.cause
    assert execution.states_entered() == ["Work"]


def test_a_callable_for_a_state_that_is_not_a_task_is_refused():
    with pytest.raises(StateMachineRunnerError, match="No Task state named Wrok"):
        run_state_machine(one_task({"End": True}), {}, {"Work": dict, "Wrok": dict})


def test_nested_task_states_are_overridden_and_retried_instantly():
    calls = iter([TaskFailed(THROTTLED, "busy"), {"ok": True}])

    def inner(_: Any) -> Any:
        answer = next(calls)
        if isinstance(answer, Exception):
            raise answer
        return answer

    definition = {
        "StartAt": "Both",
        "States": {
            "Both": {
                "Type": "Parallel",
                "End": True,
                "Branches": [
                    {
                        "StartAt": "Inner",
                        "States": {
                            "Inner": {
                                "Type": "Task",
                                "Resource": LAMBDA_ARN,
                                "Retry": [{"ErrorEquals": [THROTTLED], **SLOW_RETRY}],
                                "End": True,
                            }
                        },
                    }
                ],
            }
        },
    }
    execution = run_state_machine(definition, {}, {"Inner": inner}, timeout=QUICK)

    assert execution.output == [{"ok": True}]
    assert execution.attempts("Inner") == 2


def test_task_callables_run_one_at_a_time():
    running = 0
    most_at_once = 0
    lock = threading.Lock()

    def slow(_: Any) -> dict[str, Any]:
        nonlocal running, most_at_once
        with lock:
            running += 1
            most_at_once = max(most_at_once, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return {}

    branches = [
        {"StartAt": name, "States": {name: {"Type": "Task", "Resource": LAMBDA_ARN, "End": True}}}
        for name in ("Left", "Right", "Middle")
    ]
    definition = {
        "StartAt": "All",
        "States": {"All": {"Type": "Parallel", "Branches": branches, "End": True}},
    }
    execution = run_state_machine(
        definition, {}, {"Left": slow, "Right": slow, "Middle": slow}, timeout=QUICK
    )

    assert execution.status == "SUCCEEDED"
    assert [execution.attempts(name) for name in ("Left", "Right", "Middle")] == [1, 1, 1]
    assert most_at_once == 1


def test_uuid_and_json_merge_intrinsics():
    definition = {
        "StartAt": "Name",
        "States": {
            "Name": {
                "Type": "Pass",
                "Parameters": {
                    "id.$": "States.UUID()",
                    "merged.$": "States.JsonMerge($.base, $.extra, false)",
                },
                "End": True,
            }
        },
    }
    execution = run_state_machine(
        definition, {"base": {"a": 1, "b": 1}, "extra": {"b": 2, "c": 3}}, {}
    )

    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
        execution.output["id"],
    )
    assert execution.output["merged"] == {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize(
    ("execution_input", "path"),
    [({"reply": {"turn": 4}}, "Answered"), ({"reply": {"error": "refused"}}, "Unanswered")],
)
def test_a_choice_on_is_present(execution_input, path):
    definition = {
        "StartAt": "Recorded",
        "States": {
            "Recorded": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.reply.turn", "IsPresent": True, "Next": "Answered"}],
                "Default": "Unanswered",
            },
            "Answered": {"Type": "Succeed"},
            "Unanswered": {"Type": "Fail", "Error": "NoTurn"},
        },
    }
    execution = run_state_machine(definition, execution_input, {})

    assert execution.states_entered() == ["Recorded", path]


@pytest.mark.parametrize(
    "content",
    [
        [{"Text": "the answer"}],
        # A reasoning model puts its reasoning first: [0].Text would be absent.
        [
            {"ReasoningContent": {"ReasoningText": {"Text": "hm"}}},
            {"Text": "the answer"},
            {"Text": "more"},
        ],
    ],
    ids=["text only", "reasoning first"],
)
def test_result_selector_takes_the_first_text_block_by_filter_and_array_get_item(content):
    selector = {"text.$": "States.ArrayGetItem($.Output.Message.Content[?(@.Text)].Text, 0)"}
    execution = run_state_machine(
        ask_the_model(ResultSelector=selector),
        {},
        {"AskTheModel": lambda _: converse_output(*content)},
    )

    assert execution.status == "SUCCEEDED", execution.cause
    assert execution.output == {"model": {"text": "the answer"}}


def test_a_filter_matching_nothing_fails_the_state_locally():
    # A known divergence: the library treats an empty match as a path that points nowhere
    # (States.Runtime, which no Catch takes) where Step Functions' JsonPath gives []. A
    # reply without a text block cannot be followed past the model locally.
    selector = {"texts.$": "$.Output.Message.Content[?(@.Text)].Text"}
    execution = run_state_machine(
        ask_the_model(ResultSelector=selector),
        {},
        {"AskTheModel": lambda _: converse_output({"ReasoningContent": {"Text": "hm"}})},
    )

    assert (execution.status, execution.error) == ("FAILED", "States.Runtime")
    assert "does not point to a value" in execution.cause


def test_intrinsic_string_results_lose_backslashes_unlike_step_functions():
    # A known divergence of aws-local-stepfunctions 3.0.0: every intrinsic's string result
    # has its backslashes removed. A plain path keeps them. Workflow tests whose text passes
    # through an intrinsic must avoid backslashes; this test flags a fixed library.
    text = r"C:\temp and \(x\)"
    definition = {
        "StartAt": "Pick",
        "States": {
            "Pick": {
                "Type": "Pass",
                "Parameters": {
                    "byIntrinsic.$": "States.ArrayGetItem($.texts, 0)",
                    "byPath.$": "$.texts[0]",
                },
                "End": True,
            }
        },
    }
    execution = run_state_machine(definition, {"texts": [text]}, {})

    assert execution.output == {"byIntrinsic": "C:temp and (x)", "byPath": text}


def test_context_object_can_be_supplied():
    definition = {
        "StartAt": "Name",
        "States": {
            "Name": {"Type": "Pass", "Parameters": {"name.$": "$$.Execution.Name"}, "End": True}
        },
    }
    execution = run_state_machine(definition, {}, {}, context={"Execution": {"Name": "run-1"}})

    assert execution.output == {"name": "run-1"}


def test_payload_sizes_count_utf8_bytes_of_compact_json():
    assert json_size({"s": "é" * 10}) == len('{"s":""}') + 20
    assert json_size([1, {"a": None}]) == len('[1,{"a":null}]')


def test_a_state_carrying_300000_bytes_is_over_the_limit_and_a_small_one_is_not():
    definition = one_task({"End": True})
    big = run_state_machine(definition, {}, {"Work": lambda _: {"summary": "x" * 300_000}})
    small = run_state_machine(definition, {}, {"Work": lambda _: {"summary": "x" * 100}})

    size, where = big.largest_state_payload()
    assert size > STATE_PAYLOAD_LIMIT
    assert where in {"Work output", "Work task result", "execution output"}
    assert small.largest_state_payload().size < 200
    assert {payload.where for payload in big.payload_sizes()} >= {
        "execution input",
        "Work input",
        "Work output",
        "Work task input",
        "Work task result",
    }


def test_jsonata_definitions_are_refused_rather_than_misread():
    definition = {
        "QueryLanguage": "JSONata",
        "StartAt": "Add",
        "States": {"Add": {"Type": "Pass", "Output": "{% $states.input.n + 1 %}", "End": True}},
    }
    with pytest.raises(StateMachineRunnerError, match="JSONata"):
        run_state_machine(definition, {"n": 1}, {})


def test_an_invalid_definition_reports_the_validators_complaint():
    definition = {"StartAt": "Nowhere", "States": {"Here": {"Type": "Succeed"}}}
    with pytest.raises(StateMachineRunnerError, match="definition is invalid"):
        run_state_machine(definition, {}, {})


def test_definition_from_template_resolves_the_tokens_of_a_joined_definition():
    template = {
        "Resources": {
            "HistoryFunction1A2B": {"Type": "AWS::Lambda::Function"},
            "Bus3C4D": {"Type": "AWS::Events::EventBus"},
            "Machine5E6F": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "DefinitionString": {
                        "Fn::Join": [
                            "",
                            [
                                '{"StartAt":"Load","States":{"Load":{"Type":"Task","Resource":"',
                                {"Fn::GetAtt": ["HistoryFunction1A2B", "Arn"]},
                                '","Next":"Publish"},"Publish":{"Type":"Task","Resource":"arn:',
                                {"Ref": "AWS::Partition"},
                                ':states:::events:putEvents","Parameters":{"Bus":"',
                                {"Ref": "Bus3C4D"},
                                '","Where":"',
                                {"Ref": "AWS::Region"},
                                "/",
                                {"Ref": "AWS::AccountId"},
                                '"},"End":true}}}',
                            ],
                        ]
                    }
                },
            },
        }
    }

    definition = definition_from_template(template)

    states = definition["States"]
    assert states["Load"]["Resource"] == (
        "arn:aws:lambda:us-east-1:123456789012:function:HistoryFunction1A2B"
    )
    assert states["Publish"]["Resource"] == "arn:aws:states:::events:putEvents"
    assert states["Publish"]["Parameters"] == {"Bus": "Bus3C4D", "Where": "us-east-1/123456789012"}
    chosen = definition_from_template(template, arns={"HistoryFunction1A2B": LAMBDA_ARN})
    assert chosen["States"]["Load"]["Resource"] == LAMBDA_ARN


def test_definition_from_template_needs_a_name_among_several_machines():
    machine = {
        "Type": "AWS::StepFunctions::StateMachine",
        "Properties": {"DefinitionString": '{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}'},
    }
    template = {"Resources": {"One": machine, "Two": machine}}

    with pytest.raises(ValueError, match="Expected one state machine"):
        definition_from_template(template)
    assert definition_from_template(template, state_machine="Two")["StartAt"] == "A"
