"""Senders' clocks that run ahead or behind the service's (issue: what real clients send).

A `sentAt` up to 5 minutes ahead is accepted. Placed where it says, such a
message would follow the messages that arrive after it: the next window would
miss it and the reply to it, and show both later, out of order. The service
places it at its arrival instead and keeps the stated time on the turn item.
A past `sentAt` is kept: it is how a transcript is replayed and how a late
reply lands where it was said.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.conversation_store import ConversationKey, ConversationStore, format_instant
from adapters.dynamodb_items import STATED_SENT_AT_ATTRIBUTE
from adapters.dynamodb_store import DynamoDBConversationStore
from converse_history.access import Caller
from converse_history.service import ConverseService, Incoming
from memory_core.settings import load_settings
from memory_core.window import NO_QUESTION_MARKER
from tests.integration.conftest import TABLE
from tests.support.in_memory_store import InMemoryConversationStore
from tests.support.simulation import CollectingQueue, Observed, SimulatedClock, StaticRules

KEY = ConversationKey("sim", "skewed")
CALLER = Caller(arn=None, identity_required=False)
SETTINGS = load_settings({})
# Recent: the DynamoDB store leaves out turns whose TTL has passed by the wall clock.
START = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


class World:
    """The real service on a store, with a clock the test moves."""

    def __init__(self, store_for: Any) -> None:
        self.clock = SimulatedClock(START.timestamp())
        self.store: ConversationStore = store_for(self.clock)
        self.service = ConverseService(
            store=self.store,
            queue=CollectingQueue(),  # type: ignore[arg-type]
            rules=StaticRules(SETTINGS.turn_retention_days),
            settings=SETTINGS,
            telemetry=Observed(),
            clock=self.clock,
            sleep=lambda _: None,
        )

    def at(self, seconds: float) -> None:
        self.clock.now = START.timestamp() + seconds

    def say(self, text: str, *, ahead: float | None = None) -> dict[str, Any]:
        sent_at = None if ahead is None else self._now() + timedelta(seconds=ahead)
        message = Incoming(None, "user", [{"text": text}], sent_at)
        return self.service.converse(KEY.tenant_id, KEY.contact_id, message, CALLER)

    def reply(self, text: str, *, ahead: float | None = None) -> dict[str, Any]:
        sent_at = None if ahead is None else self._now() + timedelta(seconds=ahead)
        message = Incoming(None, "assistant", [{"text": text}], sent_at)
        return self.service.record(KEY.tenant_id, KEY.contact_id, message, CALLER)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.now, UTC)


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], " ".join(b["text"] for b in m["content"] if "text" in b)) for m in messages]


@pytest.fixture(params=["dynamodb", "in-memory"])
def world(request: pytest.FixtureRequest) -> World:
    if request.param == "in-memory":
        return World(lambda clock: InMemoryConversationStore(SETTINGS.turn_retention_days, clock))
    client = request.getfixturevalue("dynamodb")
    return World(
        lambda clock: DynamoDBConversationStore(client, TABLE, SETTINGS.turn_retention_days)
    )


@pytest.mark.parametrize("ahead", [20, 60, 300])
def test_a_message_from_a_clock_ahead_is_in_the_next_window_before_the_reply(
    world: World, ahead: int
) -> None:
    world.at(0)
    world.say("It is 4471", ahead=ahead)
    world.at(2)
    world.reply("Thank you, I am checking order 4471.")
    world.at(5)
    answer = world.say("Any news?")
    assert texts(answer["history"]) == [
        ("user", "It is 4471"),
        ("assistant", "Thank you, I am checking order 4471."),
    ]
    assert answer["window"]["dropped"] == 0
    assert texts(answer["converse"]["messages"])[-1] == ("user", "Any news?")

    # Past the stated time, the order stays the order of arrival, nothing merged.
    world.at(ahead + 1)
    world.reply("It ships tomorrow.")
    world.at(ahead + 6)
    later = world.say("Thanks!")
    assert texts(later["history"]) == [
        ("user", "It is 4471"),
        ("assistant", "Thank you, I am checking order 4471."),
        ("user", "Any news?"),
        ("assistant", "It ships tomorrow."),
    ]
    assert later["window"]["dropped"] == 0


def test_a_reply_from_a_clock_ahead_is_placed_at_its_arrival(world: World) -> None:
    world.at(0)
    world.say("Where is my order?")
    world.at(1)
    recorded = world.reply("On its way.", ahead=120)
    assert recorded["turn"]["sentAt"] == format_instant(START + timedelta(seconds=1))
    world.at(3)
    answer = world.say("When will it arrive?")
    assert texts(answer["history"]) == [
        ("user", "Where is my order?"),
        ("assistant", "On its way."),
    ]


def test_a_past_sent_at_keeps_its_place(world: World) -> None:
    """A late reply, filed after the contact's next message, lands where it was said."""
    world.at(0)
    world.say("Is clause 7 in force?")
    world.at(30)
    world.say("And clause 8?")
    world.at(40)
    world.reply("Clause 7 is in force.", ahead=-35)  # said at 5 s
    world.at(50)
    answer = world.say("Thanks")
    assert texts(answer["history"]) == [
        ("user", "Is clause 7 in force?"),
        ("assistant", "Clause 7 is in force."),
        ("user", "And clause 8?"),
    ]


def test_the_stated_time_is_kept_apart_on_the_turn_item(dynamodb: Any) -> None:
    world = World(lambda clock: DynamoDBConversationStore(dynamodb, TABLE, 30))
    world.at(0)
    world.say("It is 4471", ahead=20)
    world.at(1)
    world.say("On time")
    items = [
        item
        for item in dynamodb.scan(TableName=TABLE)["Items"]
        if item["SK"]["S"].startswith("TURN#2")
    ]
    by_text = {item["content"]["S"]: item for item in items}
    ahead = by_text['[{"text":"It is 4471"}]']
    assert ahead["sentAt"]["S"] == format_instant(START)
    assert ahead[STATED_SENT_AT_ATTRIBUTE]["S"] == format_instant(START + timedelta(seconds=20))
    assert STATED_SENT_AT_ATTRIBUTE not in by_text['[{"text":"On time"}]']
    (stored,) = [
        s for s in world.store.unfolded_turns(KEY, None, 10) if s.turn.id == ahead["turnId"]["S"]
    ]
    assert stored.turn.sent_at == START
    assert stored.turn.stated_sent_at == START + timedelta(seconds=20)


# -- a property over random arrival and sent orders -------------------------------

Event = tuple[str, int, int | None]
"""(role, seconds since the previous arrival, the sender's skew in seconds or None)."""

EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant"]),
        st.integers(min_value=0, max_value=40),
        st.one_of(st.none(), st.integers(min_value=-120, max_value=300)),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=150, deadline=None)
@given(events=EVENTS)
def test_every_window_is_the_conversation_so_far_in_its_order(events: list[Event]) -> None:
    """The conversation's order: by `sentAt`, a time ahead of the arrival counting as the
    arrival, then by arrival. Every window is exactly what precedes its message in that
    order, from the first question on (everything fits the defaults here): no turn
    within the floor is lost, none is out of order."""
    world = World(lambda clock: InMemoryConversationStore(SETTINGS.turn_retention_days, clock))
    recorded: list[tuple[tuple[float, float, int], str, str]] = []
    arrival = 0.0
    for index, (role, gap, skew) in enumerate(events):
        arrival += gap + 0.001  # distinct arrivals: the service's clock moves
        world.at(arrival)
        text = f"{role} message {index}"
        place = (arrival + min(skew or 0, 0), arrival, index)
        if role == "user":
            answer = world.say(text, ahead=skew)
            before = sorted(entry for entry in recorded if entry[0] < place)
            first_question = next((i for i, entry in enumerate(before) if entry[1] == "user"), 0)
            if before and before[first_question][1] != "user":
                # Only the agent's messages so far: shown, behind the marker that says so.
                expected = [("user", NO_QUESTION_MARKER)] + [(r, t) for _, r, t in before]
            else:
                expected = [(r, t) for _, r, t in before[first_question:]]
            assert texts(answer["history"]) == expected
            if len(before) == len(recorded):
                # (A message dated before turns already recorded counts them as dropped.)
                assert answer["window"]["dropped"] == first_question
        else:
            world.reply(text, ahead=skew)
        recorded.append((place, role, text))
