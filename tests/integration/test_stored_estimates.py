"""A turn is estimated, and a long one cut for the trim, once: as it is recorded.

The turn item keeps both (`costUnits`, `textCut`), and a window reads them
instead of making them again. Items from before carry neither and are
estimated when read; a cut made for another trim shape is not used.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.conversation_store import ConversationKey
from adapters.dynamodb_items import COST_UNITS_ATTRIBUTE, TEXT_CUT_ATTRIBUTE
from adapters.dynamodb_store import DynamoDBConversationStore
from converse_history.access import Caller
from converse_history.service import ConverseService, Incoming
from memory_core.settings import load_settings
from tests.integration.conftest import TABLE
from tests.support.simulation import CollectingQueue, Observed, SimulatedClock, StaticRules

KEY = ConversationKey("sim", "estimates")
CALLER = Caller(arn=None, identity_required=False)
SETTINGS = load_settings({})  # trim: over 1,000 tokens, to 400 + 400
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
LONG_REPLY = "word " * 12_000  # 4 letters and a space: 53 units a word, 9,938 tokens


@pytest.fixture
def client(dynamodb: Any) -> Any:
    return dynamodb


class World:
    def __init__(self, client: Any, key: ConversationKey = KEY) -> None:
        self.client = client
        self.key = key
        self.clock = SimulatedClock(START.timestamp())
        self.service = ConverseService(
            store=DynamoDBConversationStore(client, TABLE, SETTINGS.turn_retention_days),
            queue=CollectingQueue(),  # type: ignore[arg-type]
            rules=StaticRules(SETTINGS.turn_retention_days),
            settings=SETTINGS,
            telemetry=Observed(),
            clock=self.clock,
            sleep=lambda _: None,
        )

    def say(self, text: str) -> dict[str, Any]:
        self.clock.now += 1
        message = Incoming(None, "user", [{"text": text}], None)
        return self.service.converse(self.key.tenant_id, self.key.contact_id, message, CALLER)

    def reply(self, text: str) -> None:
        self.clock.now += 1
        message = Incoming(None, "assistant", [{"text": text}], None)
        self.service.record(self.key.tenant_id, self.key.contact_id, message, CALLER)

    def turn_items(self) -> list[dict[str, Any]]:
        items = self.client.scan(TableName=TABLE)["Items"]
        mine = [item for item in items if item["PK"]["S"] == self.key.partition]
        turns = (item for item in mine if "turnId" in item)
        return sorted(turns, key=lambda item: item["SK"]["S"])

    def set(self, item: dict[str, Any], attribute: str, value: dict[str, Any]) -> None:
        self.client.update_item(
            TableName=TABLE,
            Key={"PK": item["PK"], "SK": item["SK"]},
            UpdateExpression="SET #a = :v",
            ExpressionAttributeNames={"#a": attribute},
            ExpressionAttributeValues={":v": value},
        )

    def remove(self, item: dict[str, Any], *attributes: str) -> None:
        names = {f"#a{n}": attribute for n, attribute in enumerate(attributes)}
        self.client.update_item(
            TableName=TABLE,
            Key={"PK": item["PK"], "SK": item["SK"]},
            UpdateExpression="REMOVE " + ", ".join(names),
            ExpressionAttributeNames=names,
        )


def recorded(world: World) -> World:
    world.say("Can you send me the whole contract?")
    world.reply(LONG_REPLY)
    return world


@pytest.fixture
def world(client: Any) -> World:
    return recorded(World(client))


def numbers(item: dict[str, Any]) -> list[int]:
    return [int(n["N"]) for n in item[TEXT_CUT_ATTRIBUTE]["L"]]


def test_each_turn_item_keeps_its_estimate_and_a_long_text_its_cut(world: World) -> None:
    question, reply = world.turn_items()
    # 28 letters, 6 spaces and a "?".
    assert int(question[COST_UNITS_ATTRIBUTE]["N"]) == 28 * 13 + 6 * 1 + 64
    assert int(question["tokens"]["N"]) == 7
    assert TEXT_CUT_ATTRIBUTE not in question
    assert int(reply[COST_UNITS_ATTRIBUTE]["N"]) == 12_000 * 53
    assert int(reply["tokens"]["N"]) == 12_000 * 53 // 64 + 1
    budget, head_tokens, tail_tokens, head, tail, omitted, units = numbers(reply)
    assert (budget, head_tokens, tail_tokens) == (1000, 400, 400)
    # 400 tokens are 25,600 units: 483 words cost 25,599, and the next "w" is 13 more;
    # from the end, the space before the last 483 words costs the one unit left.
    assert (head, tail) == (483 * 5, 483 * 5 + 1)
    assert omitted == -(-(12_000 * 53 - 25_599 - 25_600) // 64) == 9138
    # The marker line: two "…" (15), 4 digits (32), 13 letters, 4 spaces, 2 line breaks (16).
    assert units == 25_599 + 25_600 + 2 * 15 + 4 * 32 + 13 * 13 + 4 + 2 * 16


def test_the_window_from_stored_estimates_is_the_one_made_from_the_text(
    world: World, client: Any
) -> None:
    before = recorded(World(client, ConversationKey("sim", "from-before")))
    for item in before.turn_items():
        before.remove(item, COST_UNITS_ATTRIBUTE, TEXT_CUT_ATTRIBUTE)
    before.clock.now = world.clock.now
    stored, estimated = world.say("And the annex?"), before.say("And the annex?")
    assert stored["history"] == estimated["history"]
    assert stored["window"] == estimated["window"]
    assert stored["window"]["trimmed"] == 1


def test_the_window_reads_the_stored_estimate_rather_than_making_it_again(world: World) -> None:
    question, reply = world.turn_items()
    world.set(question, COST_UNITS_ATTRIBUTE, {"N": str(64 * 500)})
    answer = world.say("And the annex?")
    assert answer["window"]["estimatedTokens"] == 500 + -(-numbers(reply)[-1] // 64)


def test_a_stored_cut_is_used_for_its_own_shape_and_ignored_for_another(world: World) -> None:
    reply = world.turn_items()[1]
    budget, head_tokens, tail_tokens, _, _, omitted, units = numbers(reply)
    cut = [budget, head_tokens, tail_tokens, 10, 10, omitted, units]
    world.set(reply, TEXT_CUT_ATTRIBUTE, {"L": [{"N": str(n)} for n in cut]})
    kept = world.say("Is that all?")["history"][1]["content"][0]["text"]
    assert kept == f"word word \n… {omitted} tokens omitted …\nword word "

    other_shape = [999, head_tokens, tail_tokens, 10, 10, omitted, units]
    world.set(reply, TEXT_CUT_ATTRIBUTE, {"L": [{"N": str(n)} for n in other_shape]})
    kept = world.say("Is that all, really?")["history"][1]["content"][0]["text"]
    head, _, tail = kept.split("\n")
    assert (head, tail) == ("word " * 483, " " + "word " * 483)
