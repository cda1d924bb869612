// Runs one Amazon States Language definition offline with aws-local-stepfunctions and
// prints one JSON document describing the execution. Driven by local_state_machine.py:
//
//   node tests/support/state_machine_runner.mjs <request.json>
//
// The request holds {"definition", "input", "taskUrl", "overriddenTasks", "validate",
// "context"?}; "validate": false skips the definition's validation (already passed once).
// Every overridden Task state POSTs {"state", "input"} to taskUrl and expects back either
// {"result": <value>} or {"error": <name>, "cause": <text>} (the task failed). Nothing
// ever reaches AWS: a Task state with no override fails the execution instead.
//
// Stdout carries only the result document; diagnostics go to stderr with a non-zero exit.

import { readFileSync } from "node:fs";

// aws-local-stepfunctions 3.0.0 declares node >= 22 and calls Promise.withResolvers (new in
// Node 22) in every Task state; Node 20 lacks it. It must exist before the package loads,
// hence the dynamic import below rather than a hoisted static one.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const { StateMachine } = await import("aws-local-stepfunctions");

class HarnessError extends Error {}

// Every state of a definition, nested ones (Parallel branches, Map processors) included:
// the library runs those as child machines that share the root's overrides by state name.
function* allStates(definition) {
  for (const [name, state] of Object.entries(definition.States ?? {})) {
    yield [name, state];
    for (const branch of state.Branches ?? []) yield* allStates(branch);
    const processor = state.ItemProcessor ?? state.Iterator;
    if (processor) yield* allStates(processor);
  }
}

function refuseWhatTheLibraryIgnores(definition) {
  // The library has no JSONata: it runs such states as JSONPath ones and silently ignores
  // Arguments/Output/Assign, so the run would look fine and mean nothing.
  const jsonata = [definition, ...[...allStates(definition)].map(([, state]) => state)].some(
    (node) => node.QueryLanguage === "JSONata",
  );
  if (jsonata) {
    throw new HarnessError("QueryLanguage JSONata is not supported by aws-local-stepfunctions");
  }
}

// ResultPath "$" means "the result replaces the input"; the library instead stores the
// result under a key named "$". Omitting ResultPath means the same thing and works.
function normaliseWholeInputResultPaths(definition) {
  for (const [, state] of allStates(definition)) {
    if (state.ResultPath === "$") delete state.ResultPath;
    for (const catcher of state.Catch ?? []) {
      if (catcher.ResultPath === "$") delete catcher.ResultPath;
    }
  }
}

async function callTask(taskUrl, state, input) {
  const response = await fetch(taskUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ state, input }),
  });
  if (!response.ok) {
    throw uncatchable(`Task server answered ${response.status} for ${state}: ${await response.text()}`);
  }
  const answer = await response.json();
  if ("error" in answer) {
    // Retry and Catch match on error.name; the message becomes the cause.
    const failure = new Error(answer.cause ?? "");
    failure.name = answer.error;
    throw failure;
  }
  return answer.result;
}

// The library consults isRetryable/isCatchable (true when absent): a harness fault must end
// the execution rather than be retried or routed by States.ALL into a workflow's own Fail.
function uncatchable(message) {
  const error = new Error(message);
  error.name = "LocalHarness.Error";
  Object.defineProperty(error, "isRetryable", { value: false });
  Object.defineProperty(error, "isCatchable", { value: false });
  return error;
}

function taskHandlers(definition, taskUrl, overriddenTasks) {
  const taskStates = [...allStates(definition)]
    .filter(([, state]) => state.Type === "Task")
    .map(([name]) => name);
  const unknown = overriddenTasks.filter((name) => !taskStates.includes(name));
  if (unknown.length > 0) {
    throw new HarnessError(
      `No Task state named ${unknown.join(", ")}; Task states: ${taskStates.join(", ")}`,
    );
  }
  const handlers = {};
  for (const name of taskStates) {
    handlers[name] = overriddenTasks.includes(name)
      ? (input) => callTask(taskUrl, name, input)
      : () => {
          // Without an override the library would invoke the real Lambda through the SDK.
          throw uncatchable(`Task state ${name} has no local handler`);
        };
  }
  return handlers;
}

function instantRetries(definition) {
  const overrides = {};
  for (const [name, state] of allStates(definition)) {
    if (state.Retry) overrides[name] = 0;
  }
  return overrides;
}

// One event as plain JSON: the state's name rather than its {name, type, input} record.
function describe(event) {
  const state = event.state ?? event.parentState;
  const described = {
    type: event.type,
    state: state?.name,
    stateType: state?.type,
    input: event.state ? event.state.input : event.input,
    output: event.state ? event.state.output : event.output,
    error: event.Error,
    cause: event.Cause,
    retry: event.retry,
    catch: event.catch?.catcher,
    index: event.index,
  };
  // A deep copy now: intrinsics such as States.JsonMerge may mutate objects that earlier
  // events still reference.
  return JSON.parse(JSON.stringify(described));
}

async function run(request) {
  const { definition, input, taskUrl, overriddenTasks = [], validate = true, context } = request;
  refuseWhatTheLibraryIgnores(definition);
  normaliseWholeInputResultPaths(definition);
  // Resources are placeholders or names here, never deployed ARNs: their syntax is not checked.
  const validationOptions = validate ? { checkArn: false } : { noValidate: true };
  const machine = new StateMachine(definition, { validationOptions });
  const execution = machine.run(input, {
    overrides: {
      taskResourceLocalHandlers: taskHandlers(definition, taskUrl, overriddenTasks),
      retryIntervalOverrides: instantRetries(definition),
    },
    ...(context === undefined ? {} : { context }),
  });

  const events = [];
  const collected = (async () => {
    for await (const event of execution.eventLogs) events.push(describe(event));
  })();
  try {
    await execution.result;
  } catch {
    // The outcome is read from the event log below, as Step Functions' history shows it.
  }
  await collected;

  const last = events.at(-1);
  switch (last?.type) {
    case "ExecutionSucceeded":
      return { status: "SUCCEEDED", output: last.output, error: null, cause: null, events };
    case "ExecutionFailed":
      return { status: "FAILED", output: null, error: last.error, cause: last.cause, events };
    case "ExecutionTimeout":
      return { status: "TIMED_OUT", output: null, error: "States.Timeout", cause: null, events };
    default:
      throw new HarnessError(`The execution ended without an outcome: ${JSON.stringify(last)}`);
  }
}

try {
  const request = JSON.parse(readFileSync(process.argv[2], "utf8"));
  process.stdout.write(`${JSON.stringify(await run(request))}\n`);
} catch (error) {
  process.stderr.write(`${error instanceof HarnessError ? error.message : error.stack}\n`);
  process.exitCode = 1;
}
