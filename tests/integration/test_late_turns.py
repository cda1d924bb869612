"""Late turns: recorded after compaction passed their position, folded by the next one.

A late turn is one whose position (its `sentAt`, then its id) is at or below
the watermark, or below the claim of a compaction in flight, when it is
recorded. It waits on the state's late list, counted in the unfolded
counters, until the next compaction folds it (docs/decisions.md, "late
turns"). These tests drive the real service and compactor over the
DynamoDB store on moto, including the race the claim closes: a turn that
lands below the new watermark while the summary is being written.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from compactor.service import Compactor, ConversationBusy, Outcome
from moto import mock_aws

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_store import DynamoDBConversationStore
from adapters.summariser import OfflineSummariser, Summary
from converse_history.access import Caller
from converse_history.service import ConverseService, Incoming
from local.aws_resources import create_table
from memory_core.settings import load_settings
from memory_core.turns import Turn
from tests.support.reliability import tally
from tests.support.simulation import CollectingQueue, Observed, StaticRules

KEY = ConversationKey("sim", "late")
CALLER = Caller(arn=None, identity_required=False)
SETTINGS = load_settings({})
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)


class World:
    def __init__(self, store: DynamoDBConversationStore) -> None:
        self.store = store
        self.observed = Observed()
        self.service = ConverseService(
            store=store,
            queue=CollectingQueue(),  # type: ignore[arg-type]
            rules=StaticRules(SETTINGS.turn_retention_days),
            settings=SETTINGS,
            telemetry=self.observed,
            sleep=lambda _: None,
        )

    def compactor(self, summariser: object | None = None) -> Compactor:
        return Compactor(
            store=self.store,
            summariser=summariser or OfflineSummariser(),  # type: ignore[arg-type]
            settings=SETTINGS,
            telemetry=self.observed,
        )

    def say(self, turn_id: str, text: str, minutes: float) -> dict[str, Any]:
        message = Incoming(turn_id, "user", [{"text": text}], START + timedelta(minutes=minutes))
        return self.service.converse(KEY.tenant_id, KEY.contact_id, message, CALLER)

    def reply(self, turn_id: str, text: str, minutes: float) -> None:
        at = START + timedelta(minutes=minutes)
        message = Incoming(turn_id, "assistant", [{"text": text}], at)
        self.service.record(KEY.tenant_id, KEY.contact_id, message, CALLER)


@pytest.fixture
def world(monkeypatch) -> Iterator[World]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "late")
        yield World(DynamoDBConversationStore(client, "late", SETTINGS.turn_retention_days))


def tally_folded(world: World, faults: int = 0) -> None:
    """Every recorded turn is in the fold by now: what is not, is lost."""
    state = world.store.state(KEY)
    assert state is not None
    folded = state.fold.turns_folded if state.fold else 0
    tally(
        "Late turns and claims",
        inputs_tried=state.turns_recorded,
        faults_injected=faults,
        lost=state.turns_recorded - folded,
    )
    assert folded == state.turns_recorded


class RecordingMeanwhile:
    """A summariser during whose call another turn is recorded (the race the claim closes)."""

    def __init__(self, meanwhile) -> None:
        self._meanwhile = meanwhile
        self.seen: list[list[str]] = []

    def summarise(self, previous: str | None, turns: Sequence[Turn], max_tokens: int) -> Summary:
        self.seen.append([t.id for t in turns])
        if self._meanwhile is not None:
            self._meanwhile()
            self._meanwhile = None
        return OfflineSummariser().summarise(previous, turns, max_tokens)


def test_a_late_reply_is_counted_listed_and_folded_by_the_next_compaction(world):
    for n in range(3):
        world.say(f"q{n}", f"question {n}.", 10 * n)
        world.reply(f"a{n}", f"answer {n}.", 10 * n + 1)
    assert world.compactor().compact(KEY).turns_folded == 6
    world.reply("late", "a late answer.", 5)  # between q0 and q1: below the watermark
    state = world.store.state(KEY)
    assert [e.position.turn_id for e in state.late_turns] == ["late"]
    assert (state.unfolded_turns, state.unfolded_tokens) == (1, 4)
    view = world.service.memory(KEY.tenant_id, KEY.contact_id, CALLER)
    assert view is not None
    assert (view["counters"]["lateTurns"], view["counters"]["unfoldedTurns"]) == (1, 1)
    world.say("q3", "next question.", 40)
    compaction = world.compactor().compact(KEY)
    assert (compaction.outcome, compaction.turns_folded) == (Outcome.FOLDED, 2)
    state = world.store.state(KEY)
    assert "a late answer" in state.fold.summary
    assert (state.late_turns, state.unfolded_turns, state.unfolded_tokens) == ((), 0, 0)
    assert state.fold.turns_folded == 8
    assert state.watermark.turn_id == "q3"
    tally_folded(world)


def test_a_late_contact_message_is_listed_and_an_only_late_backlog_is_folded(world):
    world.say("q0", "first.", 0)
    world.say("q1", "second.", 10)
    world.compactor().compact(KEY)
    answer = world.say("old", "delivered late.", 5)
    assert answer["decision"] == "model"
    assert [e.position.turn_id for e in world.store.state(KEY).late_turns] == ["old"]
    compaction = world.compactor().compact(KEY)
    assert compaction.turns_folded == 1
    state = world.store.state(KEY)
    assert (state.late_turns, state.fold.turns_folded, state.watermark.turn_id) == ((), 3, "q1")
    assert state.fold.covers_from == START  # the range still starts at q0
    tally_folded(world)


def test_a_turn_landing_below_the_claim_while_the_summary_is_written_is_not_lost(world):
    for n in range(3):
        world.say(f"q{n}", f"question {n}.", 10 * n)
    # While the compactor summarises q0..q2, a reply sent between q1 and q2 arrives.
    summariser = RecordingMeanwhile(lambda: world.reply("mid", "in between.", 15))
    assert world.compactor(summariser).compact(KEY).turns_folded == 3
    state = world.store.state(KEY)
    assert state.watermark.turn_id == "q2"
    assert state.folding_through is None
    # Below the new watermark and not folded: listed, counted, and a gap until folded.
    assert [e.position.turn_id for e in state.late_turns] == ["mid"]
    assert state.unfolded_turns == 1
    world.compactor(summariser).compact(KEY)
    assert summariser.seen == [["q0", "q1", "q2"], ["mid"]]
    state = world.store.state(KEY)
    assert (state.late_turns, state.unfolded_turns, state.fold.turns_folded) == ((), 0, 4)
    tally_folded(world, faults=1)


def test_a_claim_is_retaken_when_a_turn_arrives_between_the_read_and_the_claim(world):
    world.say("q0", "first.", 0)
    store = world.store
    real_claim = store.claim
    arrived: list[str] = []

    def claim_after_an_arrival(*args, **kwargs):
        arrived.append(f"r{len(arrived)}")
        world.reply(arrived[-1], "again.", len(arrived))
        return real_claim(*args, **kwargs)

    store.claim = claim_after_an_arrival
    with pytest.raises(ConversationBusy):
        world.compactor().compact(KEY)
    state = store.state(KEY)
    assert len(arrived) == 5  # one arrival before each claim: every attempt refused
    assert (state.fold, state.folding_through, state.unfolded_turns) == (None, None, 6)
    store.claim = real_claim
    assert world.compactor().compact(KEY).turns_folded == 6
    tally_folded(world, faults=len(arrived))


def test_a_count_left_by_a_turn_the_ttl_deleted_unread_is_settled_at_zero(world):
    world.say("q0", "first.", 0)
    state = world.store.state(KEY)
    assert (state.unfolded_turns, state.lease_until) == (1, None)
    # DynamoDB's TTL deletes the turn before any compaction reads it: its count is orphaned.
    client = world.store._client
    items = client.query(
        TableName="late",
        KeyConditionExpression="PK = :pk AND begins_with(SK, :turn)",
        ExpressionAttributeValues={":pk": {"S": KEY.partition}, ":turn": {"S": "TURN#2"}},
    )["Items"]
    client.delete_item(TableName="late", Key={"PK": items[0]["PK"], "SK": items[0]["SK"]})
    assert world.compactor().compact(KEY).outcome is Outcome.NOTHING_TO_FOLD
    state = world.store.state(KEY)
    assert (state.unfolded_turns, state.unfolded_tokens) == (0, 0)
