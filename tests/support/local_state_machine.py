"""Runs a real Step Functions definition offline, its Task states answered by Python callables.

The interpreter is the npm package aws-local-stepfunctions (pinned in package.json), driven
by state_machine_runner.mjs. Each Task state is overridden: the runner POSTs the task's
input to a small HTTP server here, which calls `tasks[state](input)` and answers its result.
A callable fails its task by raising `TaskFailed(error, cause)`, which Retry and Catch match
by that error name, exactly as they would a Lambda's or an SDK integration's error.

    definition = definition_from_template(template.to_json())
    execution = run_state_machine(definition, {"tenantId": "acme"}, {"Load": load})
    assert execution.status == "SUCCEEDED"

Retry pauses are overridden to 0 ms, so retries run instantly. Nothing reaches AWS: a Task
state with no callable fails the execution with `LocalHarness.Error`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path("tests", "support", "state_machine_runner.mjs")

# Step Functions' limit on one state's input or output (and a task's parameters or result),
# counted in UTF-8 bytes of the JSON text; beyond it the execution fails with
# States.DataLimitExceeded. The local interpreter does not enforce it: measure with
# `Execution.largest_state_payload()`.
STATE_PAYLOAD_LIMIT = 256 * 1024

PARTITION = "aws"
REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
PSEUDO_PARAMETERS = {
    "AWS::Partition": PARTITION,
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT_ID,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "LocalStack",
}
# How the ARN of a resource type names its resource; other types get the generic shape.
ARN_RESOURCE_PARTS = {
    "AWS::Lambda::Function": "lambda:{region}:{account}:function:{id}",
    "AWS::Events::EventBus": "events:{region}:{account}:event-bus/{id}",
    "AWS::SQS::Queue": "sqs:{region}:{account}:{id}",
    "AWS::SNS::Topic": "sns:{region}:{account}:{id}",
    "AWS::DynamoDB::Table": "dynamodb:{region}:{account}:table/{id}",
    "AWS::StepFunctions::StateMachine": "states:{region}:{account}:stateMachine:{id}",
    "AWS::IAM::Role": "iam::{account}:role/{id}",
    "AWS::Logs::LogGroup": "logs:{region}:{account}:log-group:{id}:*",
}

ArnLookup = Mapping[str, str] | Callable[[str], str]

# Validating a definition costs the runner about half a second (the validator compiles its
# JSON schemas on every call); a definition that passed once in this process is not
# validated again.
_validated_definitions: set[str] = set()
_validated_lock = threading.Lock()


class TaskFailed(Exception):
    """Raised by a task callable: the state fails with this error name and cause."""

    def __init__(self, error: str, cause: str = "") -> None:
        super().__init__(f"{error}: {cause}" if cause else error)
        self.error = error
        self.cause = cause


class StateMachineRunnerError(RuntimeError):
    """The runner itself failed (bad definition, missing node_modules, crash, timeout)."""


class TaskCall(NamedTuple):
    state: str
    input: Any
    result: Any  # None when the task failed
    error: str | None  # the error name the task failed with, if it did


class PayloadSize(NamedTuple):
    size: int  # UTF-8 bytes of the compact JSON text
    where: str  # e.g. "AskTheModel output", "execution input", "Record task result"


@dataclass(frozen=True)
class Execution:
    """One finished execution; `events` are the runner's, one dict per library event."""

    status: str  # SUCCEEDED, FAILED or TIMED_OUT
    output: Any
    error: str | None
    cause: Any
    events: tuple[dict[str, Any], ...]
    # The traceback of every exception other than TaskFailed raised by a task callable:
    # such an exception still fails the task (error name = its class name), but is a bug
    # in the test's callable or the code under test, so it is kept here to be looked at.
    task_exceptions: tuple[str, ...] = ()
    task_calls: tuple[TaskCall, ...] = ()

    def states_entered(self) -> list[str]:
        """Names of the states entered, in order (a retry is not a new entry)."""
        return [e["state"] for e in self.events if e["type"] == "StateEntered"]

    def attempts(self, state: str) -> int:
        """How many times a Task state's callable was called, retries included."""
        return sum(1 for call in self.task_calls if call.state == state)

    def payload_sizes(self) -> list[PayloadSize]:
        """Every input and output the events carried, then every task call's input and result
        (what the callable saw before ResultSelector, which the limit applies to as well)."""
        return list(self._payloads())

    def largest_state_payload(self) -> PayloadSize:
        """The largest payload, to compare with STATE_PAYLOAD_LIMIT."""
        return max(self._payloads(), key=lambda payload: payload.size)

    def _payloads(self) -> Iterator[PayloadSize]:
        for event in self.events:
            owner = event.get("state") or "execution"
            for side in ("input", "output"):
                if side in event:
                    yield PayloadSize(json_size(event[side]), f"{owner} {side}")
        for call in self.task_calls:
            yield PayloadSize(json_size(call.input), f"{call.state} task input")
            if call.error is None:
                yield PayloadSize(json_size(call.result), f"{call.state} task result")


def json_size(value: Any) -> int:
    """UTF-8 bytes of the compact JSON text of a value, as Step Functions counts a payload."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8"))


def definition_from_template(
    template_json: Mapping[str, Any],
    *,
    arns: ArnLookup | None = None,
    state_machine: str | None = None,
) -> dict[str, Any]:
    """The parsed ASL definition of a synthesised template's state machine.

    `state_machine` names the logical id when the template holds more than one. Tokens in
    the definition become placeholders: pseudo parameters (partition `aws`, region
    `us-east-1`, account `123456789012`), `Ref` of a resource its logical id, `Fn::GetAtt`
    `Arn` an ARN naming the logical id, unless `arns` (by logical id) says otherwise.
    """
    resources: Mapping[str, Any] = template_json.get("Resources", {})
    machines = {
        logical_id: resource
        for logical_id, resource in resources.items()
        if resource.get("Type") == "AWS::StepFunctions::StateMachine"
    }
    if state_machine is None:
        if len(machines) != 1:
            raise ValueError(f"Expected one state machine, found {sorted(machines)}")
        (machine,) = machines.values()
    elif state_machine in machines:
        machine = machines[state_machine]
    else:
        raise ValueError(f"No state machine {state_machine!r}; found {sorted(machines)}")

    properties = machine.get("Properties", {})
    if "DefinitionString" not in properties:
        raise ValueError("The state machine has no DefinitionString")
    resolver = _TokenResolver(resources, arns)
    text = resolver.resolve(properties["DefinitionString"])
    for name, value in properties.get("DefinitionSubstitutions", {}).items():
        text = text.replace("${" + name + "}", resolver.resolve(value))
    definition: dict[str, Any] = json.loads(text)
    return definition


class _TokenResolver:
    def __init__(self, resources: Mapping[str, Any], arns: ArnLookup | None) -> None:
        self._resources = resources
        self._arns = arns

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            if function == "Fn::Join":
                delimiter, parts = argument
                return str(delimiter).join(self.resolve(part) for part in parts)
            if function == "Ref":
                return PSEUDO_PARAMETERS.get(argument) or self._known(argument)
            if function == "Fn::GetAtt":
                logical_id, attribute = (
                    argument.split(".", 1) if isinstance(argument, str) else argument
                )
                return self._attribute(self._known(logical_id), attribute)
        raise ValueError(f"Cannot resolve the token {value!r} in a state machine definition")

    def _known(self, logical_id: str) -> str:
        if logical_id not in self._resources:
            raise ValueError(f"The definition refers to {logical_id!r}, not in the template")
        return logical_id

    def _attribute(self, logical_id: str, attribute: str) -> str:
        if attribute != "Arn":
            # Names, ids and the like: the logical id is as plausible as any.
            return logical_id
        if isinstance(self._arns, Mapping):
            if logical_id in self._arns:
                return self._arns[logical_id]
        elif self._arns is not None:
            return self._arns(logical_id)
        kind = self._resources[logical_id].get("Type", "")
        service = kind.split("::")[1].lower() if kind.count("::") == 2 else "unknown"
        shape = ARN_RESOURCE_PARTS.get(kind, service + ":{region}:{account}:{id}")
        resource = shape.format(region=REGION, account=ACCOUNT_ID, id=logical_id)
        return f"arn:{PARTITION}:{resource}"


def run_state_machine(
    definition: Mapping[str, Any],
    execution_input: Any,
    tasks: Mapping[str, Callable[[Any], Any]],
    *,
    timeout: float = 120,
    context: Mapping[str, Any] | None = None,
) -> Execution:
    """Runs the definition to its end and returns what happened.

    `tasks` maps Task state names (nested ones too) to callables taking the task's input
    (after InputPath and Parameters) and returning its JSON-serialisable result. They are
    called one at a time, on a server thread, like Lambda invocations would be. `context`,
    if given, is the Context Object (`$$`); the interpreter supplies only
    `$$.Execution.Input` and `$$.Execution.StartTime` on its own.
    """
    if not (REPO_ROOT / "node_modules" / "aws-local-stepfunctions").is_dir():
        raise StateMachineRunnerError(
            "aws-local-stepfunctions is not installed: run `npm ci` (`make test` does)"
        )
    node = shutil.which("node")
    if node is None:
        raise StateMachineRunnerError("node is not on PATH")

    fingerprint = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
    with _validated_lock:
        validate = fingerprint not in _validated_definitions
    recorder = _TaskRecorder(tasks)
    server = ThreadingHTTPServer(("127.0.0.1", 0), recorder.handler())
    # A short poll: shutdown() waits for the serving loop to look up, once per run.
    server_thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    server_thread.start()
    try:
        host, port = server.server_address[:2]
        request = {
            "definition": definition,
            "input": execution_input,
            "taskUrl": f"http://{host!s}:{port}",
            "overriddenTasks": sorted(tasks),
            "validate": validate,
        }
        if context is not None:
            request["context"] = context
        with tempfile.TemporaryDirectory() as directory:
            request_file = Path(directory, "request.json")
            request_file.write_text(json.dumps(request), encoding="utf-8")
            try:
                completed = subprocess.run(
                    [node, str(RUNNER), str(request_file)],
                    cwd=REPO_ROOT,
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as expired:
                raise StateMachineRunnerError(
                    f"The runner did not finish within {timeout}s; stderr:\n{_text(expired.stderr)}"
                ) from expired
    finally:
        server.shutdown()
        server.server_close()
        server_thread.join()

    if completed.returncode != 0:
        raise StateMachineRunnerError(
            f"The runner exited with {completed.returncode}; stderr:\n{completed.stderr}"
        )
    with _validated_lock:
        _validated_definitions.add(fingerprint)
    try:
        report = json.loads(completed.stdout)
    except json.JSONDecodeError as error:
        raise StateMachineRunnerError(
            f"The runner printed no JSON document ({error}); stdout:\n"
            f"{completed.stdout[:2000]}\nstderr:\n{completed.stderr}"
        ) from error
    return Execution(
        status=report["status"],
        output=report["output"],
        error=report["error"],
        cause=report["cause"],
        events=tuple(report["events"]),
        task_exceptions=tuple(recorder.exceptions),
        task_calls=tuple(recorder.calls),
    )


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


class _TaskRecorder:
    """Calls the task callables one at a time and records every call."""

    def __init__(self, tasks: Mapping[str, Callable[[Any], Any]]) -> None:
        self._tasks = tasks
        self._lock = threading.Lock()
        self.calls: list[TaskCall] = []
        self.exceptions: list[str] = []

    def answer(self, state: str, task_input: Any) -> dict[str, Any]:
        with self._lock:
            try:
                result = self._tasks[state](task_input)
                json_size(result)  # an unserialisable result fails here, as the task's fault
            except TaskFailed as failure:
                self.calls.append(TaskCall(state, task_input, None, failure.error))
                return {"error": failure.error, "cause": failure.cause}
            except Exception as error:  # a bug, not a modelled failure: fail it, keep it
                self.exceptions.append(f"Task state {state}:\n{traceback.format_exc()}")
                self.calls.append(TaskCall(state, task_input, None, type(error).__name__))
                return {"error": type(error).__name__, "cause": str(error)}
            self.calls.append(TaskCall(state, task_input, result, None))
            return {"result": result}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class TaskHandler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length))
                if request.get("state") not in recorder._tasks:
                    self._reply(404, {"message": f"no task callable for {request.get('state')}"})
                    return
                self._reply(200, recorder.answer(request["state"], request.get("input")))

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Silent: one line per task call would drown the test output."""

        return TaskHandler
