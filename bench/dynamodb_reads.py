"""DynamoDB items read, and API calls made, by one converse call through the real handler.

Under moto (in-process `mock_aws`, with `local.moto_dynamodb`'s fixes, as
`make run` serves it). Recording ten thousand turns through the handler would
take minutes a conversation, so each conversation is seeded directly: the turn items are
the ones the store itself builds (`DynamoDBConversationStore.record_reply`
against a client that keeps what it is asked to write, then one
`batch_write_item` per 25), the state item carries the counters a
conversation of that length has, and the fold is committed through the
store's own `commit_fold`. The state is then read back through the store and
checked, so the seeded shape cannot drift from what the code reads.

Then one converse call goes through `lambda_handler`, as API Gateway sends
it, and botocore's event hooks on the handler's own client count the
DynamoDB calls (`before-call.dynamodb`) and sum the Queries' `ScannedCount`
(`after-call.dynamodb.Query`): the items DynamoDB reads, and bills, for it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import boto3
from moto import mock_aws

from adapters.conversation_store import ConversationKey, format_instant
from adapters.dynamodb_store import (
    STATE_SK,
    TTL_ATTRIBUTE,
    TURN_PREFIX,
    DynamoDBConversationStore,
    turn_sort_key,
)
from adapters.summariser import OfflineSummariser
from bench.common import (
    EXAMPLE_RULES,
    FAKE_CREDENTIALS,
    POWERTOOLS,
    derived_rng,
    median,
    patched_environ,
)
from bench.conversations import as_turns, conversation
from local import moto_dynamodb
from local.aws_resources import create_queues, create_table
from local.proxy_events import invoke, proxy_event
from memory_core.fold import next_fold
from memory_core.history_range import expires_at
from memory_core.settings import load_settings
from memory_core.tokens import estimate_turn_tokens
from memory_core.turns import Turn

TABLE = "bench-conversation-memory"
QUEUE = "bench-compaction"
TENANT = "demo"  # in rules.example.json: the defaults, no rate limit
UNFOLDED_TURNS = 8
"""Turns newer than the fold's watermark: a fold that keeps up, as in the usual path."""
HANDLER_MODULE = "converse_history.handler"


class _KeepingClient:
    """Stands in for botocore's client: keeps the turn items the store asks it to write."""

    def __init__(self) -> None:
        self.turn_items: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        for entry in kwargs["TransactItems"]:
            put = entry.get("Put")
            if put and put["Item"]["SK"]["S"].startswith(TURN_PREFIX):
                self.turn_items.append(put["Item"])
        return {}

    def query(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def delete_item(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError

    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class CallCounter:
    """What botocore's hooks saw on one client: the operations and the items scanned."""

    operations: list[str] = field(default_factory=list)
    scanned: list[int] = field(default_factory=list)

    def before_call(self, model: Any, **_: Any) -> None:
        self.operations.append(str(model.name))

    def after_query(self, parsed: dict[str, Any], **_: Any) -> None:
        self.scanned.append(int(parsed.get("ScannedCount", 0)))

    def reset(self) -> None:
        self.operations.clear()
        self.scanned.clear()


def seeded_turns(turns: int, now: datetime) -> list[Turn]:
    """`turns` mixed-size turns a minute apart, the newest two minutes ago."""
    messages = conversation(derived_rng("dynamodb", turns), turns)
    return as_turns(messages, start=now - timedelta(minutes=turns + 1))


def seed_conversation(dynamodb: Any, key: ConversationKey, turns: list[Turn]) -> None:
    settings = load_settings({})
    keeping = _KeepingClient()
    writer = DynamoDBConversationStore(keeping, TABLE, settings.turn_retention_days)
    tokens = [estimate_turn_tokens(turn) for turn in turns]
    for turn, estimate in zip(turns, tokens, strict=True):
        writer.record_reply(key, turn, estimate, lifetime_days=settings.turn_retention_days)
    for start in range(0, len(keeping.turn_items), 25):
        batch = keeping.turn_items[start : start + 25]
        dynamodb.batch_write_item(
            RequestItems={TABLE: [{"PutRequest": {"Item": item}} for item in batch]}
        )
    last_contact = max(t.sent_at for t in turns if t.role == "user")
    newest = turns[-1]
    state_item = {
        "PK": {"S": key.partition},
        "SK": {"S": STATE_SK},
        "version": {"N": str(sum(1 for t in turns if t.role == "user"))},
        "streakCount": {"N": "1"},
        "lastContactAt": {"S": format_instant(last_contact)},
        "recentContact": {"L": []},
        "unfoldedTokens": {"N": str(sum(tokens))},
        "unfoldedTurns": {"N": str(len(turns))},
        "turnsRecorded": {"N": str(len(turns))},
        TTL_ATTRIBUTE: {"N": str(expires_at(newest.sent_at, settings.turn_retention_days))},
    }
    dynamodb.put_item(TableName=TABLE, Item=state_item)
    # The fold, through the store's own commit: it also moves the unfolded counters.
    store = DynamoDBConversationStore(dynamodb, TABLE, settings.turn_retention_days)
    folded = turns[:-UNFOLDED_TURNS] if len(turns) > UNFOLDED_TURNS else []
    if folded:
        summary = OfflineSummariser().summarise(
            None, folded[-50:], settings.memory_summary_max_tokens
        )
        committed = store.commit_fold(
            key,
            next_fold(None, folded, summary.text, version=1),
            watermark=folded[-1].position,
            late_passed=0,
            expected_version=0,
            passed_tokens=sum(tokens[: len(folded)]),
            passed_turns=len(folded),
        )
        assert committed, "the seeded fold was refused"
    _check_seeded(store, key, turns, folded)


def _check_seeded(
    store: DynamoDBConversationStore, key: ConversationKey, turns: list[Turn], folded: list[Turn]
) -> None:
    state = store.state(key)
    assert state is not None, "the seeded state cannot be read back"
    assert state.turns_recorded == len(turns)
    assert state.unfolded_turns == len(turns) - len(folded)
    if folded:
        assert state.fold is not None
        assert state.watermark == folded[-1].position
        assert state.fold.turns_folded == len(folded)
    item = store._client.get_item(  # the newest turn, as the store wrote it
        TableName=TABLE,
        Key={"PK": {"S": key.partition}, "SK": {"S": turn_sort_key(turns[-1].position)}},
    )["Item"]
    assert json.loads(item["content"]["S"]) == list(turns[-1].content)


@contextlib.contextmanager
def handler_under_moto(*, fixed_emulation: bool = True) -> Iterator[tuple[ModuleType, Any, Any]]:
    """The converse handler imported fresh inside `mock_aws`, with its table and queue.

    `fixed_emulation=False` leaves moto as released (bench/emulation.py compares the two).
    """
    environment: dict[str, str | None] = {
        **FAKE_CREDENTIALS,
        **POWERTOOLS,
        "AWS_ENDPOINT_URL": None,
        "TABLE_NAME": TABLE,
        "RULES_FILE": str(EXAMPLE_RULES),
        "RULES_SOURCE": "file",
        "CALLER_IDENTITY": "optional",
    }
    if fixed_emulation:
        moto_dynamodb.install()
    # The handler logs and flushes its metrics to stdout, as in Lambda; not here.
    with (
        patched_environ(environment),
        mock_aws(),
        open(os.devnull, "w") as sink,
        contextlib.redirect_stdout(sink),
        warnings.catch_warnings(),
    ):
        # A reply emits no metric, and Powertools says so on every one.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        dynamodb = boto3.client("dynamodb")
        sqs = boto3.client("sqs")
        create_table(dynamodb, TABLE)
        queue_url, _ = create_queues(sqs, QUEUE)
        with patched_environ({"COMPACTION_QUEUE_URL": queue_url}):
            sys.modules.pop(HANDLER_MODULE, None)
            handler = importlib.import_module(HANDLER_MODULE)
            try:
                yield handler, dynamodb, sqs
            finally:
                sys.modules.pop(HANDLER_MODULE, None)


def hook(handler: ModuleType) -> CallCounter:
    counter = CallCounter()
    events = handler.SERVICE._store._client.meta.events
    events.register("before-call.dynamodb", counter.before_call)
    events.register("after-call.dynamodb.Query", counter.after_query)
    return counter


def converse(handler: ModuleType, contact: str, text: str, sent_at: datetime) -> dict[str, Any]:
    body = {"message": {"text": text, "sentAt": format_instant(sent_at)}}
    path = f"/v1/tenants/{TENANT}/contacts/{contact}/converse"
    status, _, answer = invoke(handler.lambda_handler, proxy_event("POST", path, json.dumps(body)))
    if status != 200:
        raise RuntimeError(f"converse answered {status}: {answer}")
    return dict(answer)


def reply(handler: ModuleType, contact: str, text: str, sent_at: datetime) -> None:
    body = {"role": "assistant", "text": text, "sentAt": format_instant(sent_at)}
    path = f"/v1/tenants/{TENANT}/contacts/{contact}/turns"
    status, _, answer = invoke(handler.lambda_handler, proxy_event("POST", path, json.dumps(body)))
    if status != 201:
        raise RuntimeError(f"reply answered {status}: {answer}")


def one_call_on(
    handler: ModuleType, dynamodb: Any, counter: CallCounter, turns: int, now: datetime
) -> dict[str, Any]:
    contact = f"seeded-{turns}"
    seeded = seeded_turns(turns, now)
    seed_conversation(dynamodb, ConversationKey(TENANT, contact), seeded)
    counter.reset()
    answer = converse(handler, contact, "Where do we stand on my order?", now)
    return {
        "items_read": sum(counter.scanned),
        "queries": len(counter.scanned),
        "operations": list(counter.operations),
        "window_kept": answer["window"]["kept"],
        "memory_turns_folded": (answer["memory"] or {}).get("turnsFolded"),
    }


def session_round_trips(handler: ModuleType, counter: CallCounter, exchanges: int) -> list[int]:
    """A new conversation's converse calls, each followed by a reply: their DynamoDB calls."""
    rng = derived_rng("dynamodb-session")
    messages = conversation(rng, 2 * exchanges)
    start = datetime.now(UTC) - timedelta(minutes=2 * exchanges + 5)
    counts: list[int] = []
    for n in range(exchanges):
        at = start + timedelta(minutes=2 * n)
        counter.reset()
        converse(handler, "session", messages[2 * n].text, at)
        counts.append(len(counter.operations))
        reply(handler, "session", messages[2 * n + 1].text, at + timedelta(minutes=1))
    return counts


def run(small: int = 30, large: int = 10_000, session_exchanges: int = 12) -> dict[str, Any]:
    """Two sections of results.json: items read per converse, and round trips per converse."""
    with handler_under_moto() as (handler, dynamodb, _):
        counter = hook(handler)
        now = datetime.now(UTC).replace(microsecond=0)
        at_small = one_call_on(handler, dynamodb, counter, small, now)
        # Before the large conversation: moto copies the whole table on every transaction.
        session = session_round_trips(handler, counter, session_exchanges)
        at_large = one_call_on(handler, dynamodb, counter, large, now)
    typical = at_small["operations"]
    return {
        "items_read_per_converse": {
            f"at_{small}": at_small["items_read"],
            f"at_{large}": at_large["items_read"],
            f"growth_{small}_to_{large}": round(at_large["items_read"] / at_small["items_read"], 3),
            f"queries_at_{small}": at_small["queries"],
            f"queries_at_{large}": at_large["queries"],
            f"window_kept_at_{small}": at_small["window_kept"],
            f"window_kept_at_{large}": at_large["window_kept"],
            "unfolded_turns": UNFOLDED_TURNS,
        },
        "dynamodb_round_trips_per_converse": len(typical),
        "dynamodb_round_trips": {
            "operations": typical,
            "operations_at_large": at_large["operations"],
            "session_converse_calls": len(session),
            "session_median": median(session),
            "session_max": max(session),
            "session_counts": dict(Counter(str(c) for c in session)),
        },
    }
