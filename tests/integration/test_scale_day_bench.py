"""`make bench`'s simulated day (bench/scale_day.py) on a small day: its arrivals and accounting.

No timing is asserted: only what the model counts, and that it counts it where
DynamoDB would (each write unit on one partition key in one second).
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamodb_items import shard_of
from bench import prices, scale_day
from bench.scale_day import Conversation, Day, Durations
from bench.write_units import item_size
from memory_core.turn_cap import Streak

CONVERSATIONS = 200


@pytest.fixture(scope="module")
def small_day() -> tuple[list[Conversation], Day]:
    return scale_day.simulate(CONVERSATIONS, seed=7)


@pytest.fixture(scope="module")
def small_figures(small_day: tuple[list[Conversation], Day]) -> dict[str, Any]:
    conversations, day = small_day
    return scale_day.figures(conversations, day, 7, Durations())


def test_every_write_unit_is_counted_once_on_one_partition_in_one_second(small_day, small_figures):
    conversations, day = small_day
    assert sum(day.table_wru.values()) + sum(day.index_wru.values()) == day.billed_wru
    assert small_figures["wru"] == day.billed_wru
    # What each (partition, second) holds is the sum of the writes made there.
    for key, units in day.table_wru.items():
        assert sum(written for _, written in day.detail[key]) == units
    calls = Counter(call.split(":")[0] for writes in day.detail.values() for call, _ in writes)
    assert set(calls) == {"converse", "reply", "compaction"}
    assert small_figures["compactions"] > 0
    assert (
        small_figures["exchanges"]
        == sum(c.messages_sent for c in conversations) - (small_figures["contact_messages_refused"])
    )


def test_a_chatty_contacts_partition_is_the_hottest(small_day, small_figures):
    _, day = small_day
    hottest = small_figures["hottest_partition"]
    assert hottest["kind"] == "conversation"
    assert hottest["style"] in ("chatty", "tool_loop")
    assert hottest["wru"] == small_figures["hottest_partition_wru_per_second"]
    assert hottest["wru"] == max(day.table_wru.values())
    assert small_figures["hottest_partition_share_of_limit"] == round(hottest["wru"] / 1_000, 4)
    busiest = small_figures["hottest_wru_per_second_by_style"]
    assert max(busiest["chatty"], busiest["tool_loop"]) > busiest["ordinary"]


def test_the_contacts_index_is_written_once_per_conversation_on_its_shard(small_day, small_figures):
    conversations, day = small_day
    assert sum(day.index_wru.values()) == CONVERSATIONS == small_figures["index_wru"]
    expected = Counter(
        (c.tenant, shard_of(scale_day.contact_id(c.number)), int(c.start)) for c in conversations
    )
    assert Counter(day.index_wru) == expected
    assert small_figures["hottest_index_shard_wru_per_second"] == max(expected.values())


def test_the_day_follows_its_curve_its_bursts_and_its_tenants_shares():
    rng = random.Random(1)
    hours = Counter(int(scale_day.curve_second(rng, 0) // 3600) for _ in range(5_000))
    office = sum(hours[h] for h in range(9, 17))
    night = sum(hours[h] for h in range(0, 6))
    assert office > 5 * night > 0
    # A tenant at UTC+8 peaks eight hours earlier in UTC.
    asia = Counter(int(scale_day.curve_second(rng, 8) // 3600) for _ in range(5_000))
    assert sum(asia[h] for h in range(1, 9)) > 5 * sum(asia[h] for h in range(16, 22))

    planned = scale_day.plan(2_000, seed=7, shape=scale_day.DayShape())
    minutes = Counter(int(c.start // 60) for c in planned)
    mean_per_busy_minute = len(planned) / len(minutes)
    assert max(minutes.values()) > 5 * mean_per_busy_minute  # a burst
    tenants = Counter(c.tenant for c in planned if c.style == "ordinary")
    assert tenants.most_common(1)[0][0] == 0  # Zipf: the first tenant is the largest
    assert Counter(c.style for c in planned)["chatty"] == scale_day.DayShape().chatty_humans


@pytest.mark.parametrize("memory_item", [True, False])
def test_the_modelled_state_is_sized_as_the_item_it_builds(memory_item):
    sizer = scale_day.StateSizer(chars_per_token=4.5, summary_cap=800, memory_item=memory_item)
    rng = random.Random(3)
    for number in range(300):
        c = Conversation(number, rng.randrange(50), "ordinary", 0.0, 5, None)
        c.version = rng.choice([0, 1, 9, 10, 120, 1_000])
        c.streak = Streak(rng.randrange(60), scale_day.DAY_START)
        c.recent = (scale_day.DAY_START,) * rng.choice([0, 20])
        c.unfolded_tokens = rng.randrange(5_000)
        c.unfolded_turns = rng.randrange(30)
        c.turns_recorded = rng.randrange(2_000)
        c.listed = rng.random() < 0.9
        c.window_at = rng.random() < 0.9
        c.compaction_version = rng.choice([0, 1, 7, 100])
        c.watermark = c.compaction_version > 0
        c.summary_tokens = rng.choice([0, 120, 800]) if c.compaction_version else 0
        c.claim = rng.choice([None, 3])
        if rng.random() < 0.5:
            c.lease_until = scale_day.DAY_START + timedelta(seconds=rng.randrange(90_000))
        on_state = c.summary_tokens and not memory_item
        fold = sizer.fold_attributes(c.summary_tokens) if on_state else 0
        assert (sizer.memory_bytes(c) > 0) == bool(c.summary_tokens and memory_item)
        for claimed in (None, True, False):
            built = item_size(sizer.state_item(c, claimed=claimed)) + fold
            assert sizer.size(c, claimed=claimed) == built


def test_the_modelled_state_has_the_attributes_the_real_commit_writes(api):
    assert api.converse("where is my order?", contact="c1")[0] == 200
    assert api.reply("it shipped on monday", contact="c1")[0] == 201
    key = {"PK": {"S": "TENANT#acme#CONTACT#c1"}, "SK": {"S": "TURN#~STATE"}}
    real = api.dynamodb.get_item(TableName="conversation-memory", Key=key)["Item"]
    modelled = Conversation(0, 0, "ordinary", 0.0, 1, None)
    modelled.version, modelled.streak, modelled.listed, modelled.window_at = (
        1,
        Streak(1, scale_day.DAY_START),
        True,
        True,
    )
    modelled.unfolded_tokens, modelled.unfolded_turns, modelled.turns_recorded = 12, 2, 2
    assert set(scale_day.StateSizer(4.5, 800).state_item(modelled)) == set(real)


def test_peak_concurrency_counts_the_invocations_running_together(small_day, small_figures):
    assert scale_day.peak_concurrency([(0.0, 1.0, "a"), (0.5, 1.5, "a"), (1.0, 2.0, "a")]) == 2
    _, day = small_day
    converse = [(start, end) for start, end, name in day.invocations if name == "converse"]
    by_hand = max(sum(1 for s, e in converse if s <= at < e) for at, _ in converse)
    assert small_figures["peak_converse_concurrency"] == by_hand
    assert small_figures["peak_lambda_concurrency"] >= by_hand


def test_the_days_cost_is_priced_from_the_one_price_table(small_day, small_figures):
    _, day = small_day
    parts = small_figures["day_cost_usd"]
    assert parts["dynamodb_writes"] == round(
        day.billed_wru * prices.DYNAMODB_USD_PER_MILLION_WRU / 1e6, 4
    )
    calls = small_figures["converse_calls"] + small_figures["reply_calls"]
    assert parts["api_gateway"] == round(calls * prices.API_GATEWAY_HTTP_USD_PER_MILLION / 1e6, 4)
    assert all(value > 0 for value in parts.values())
    assert parts["total"] == pytest.approx(sum(v for k, v in parts.items() if k != "total"), 1e-3)


def test_the_figure_is_the_same_for_a_seed():
    assert scale_day.run(60, seed=11) == scale_day.run(60, seed=11)
    assert scale_day.run(60, seed=11) != scale_day.run(60, seed=12)


def test_the_memory_in_its_own_item_takes_the_summary_off_every_state_write():
    _, on_state = scale_day.simulate(CONVERSATIONS, seed=7, memory_item=False)
    _, own_item = scale_day.simulate(CONVERSATIONS, seed=7, memory_item=True)
    assert own_item.memory_item
    assert not on_state.memory_item
    assert own_item.billed_wru < on_state.billed_wru
