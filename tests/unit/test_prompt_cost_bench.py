"""The prompt-cost bench's conversion of prompts into the cache model's blocks, by hand."""

from __future__ import annotations

import random
from itertools import pairwise
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from bench import prompt_cost
from bench.bedrock_cache import CLAUDE_SONNET, NOVA_LITE, Block, Prompt, PromptCache
from bench.prompt_cost import (
    as_prompt,
    block_key,
    estimate_messages,
    fragment_prompt,
    trimmed,
    without_history_points,
)
from memory_core.tokens import estimate_tokens, text_units
from tests.support.simulation import Exchange

# A letter costs 13 units, 64 a token: 64 letters are 13 tokens. The agent's prompt and
# the memory are over Nova's minimum prefix for a cache point (1,536 tokens).
AGENT = {"text": "a" * 7680}  # 7,680 x 13 = 99,840 units: 1,560 tokens
MEMORY = {"text": "m" * 1025}  # 13,325 units: 208 tokens (13,312) and 13 units, 209
POINT = {"cachePoint": {"type": "default"}}


def text(role: str, chars: int, fill: str) -> dict[str, Any]:
    """A message of `chars` letters, all `fill`."""
    return {"role": role, "content": [{"text": fill * chars}]}


def chat(chars: int, fills: str) -> list[dict[str, Any]]:
    """Alternating messages, the contact's first, one fill character each."""
    return [text("assistant" if n % 2 else "user", chars, fill) for n, fill in enumerate(fills)]


def fragment(*messages: dict[str, Any], system_ttl: str = "1h") -> dict[str, Any]:
    """The service's shape: the memory then its point, the history's point before the current."""
    *history, current = messages
    *before, last = history
    marked = {**last, "content": [*last["content"], POINT]}
    memory_point = {"cachePoint": {"type": "default", "ttl": system_ttl}}
    return {"system": [MEMORY, memory_point], "messages": [*before, marked, current]}


def block(role: str, content: dict[str, Any], tokens: int) -> Block:
    return Block(block_key(role, content), tokens)


def test_a_fragment_with_two_cache_points_becomes_its_blocks_and_points():
    q1, a1, q2 = text("user", 64, "q"), text("assistant", 640, "a"), text("user", 9, "r")
    prompt = fragment_prompt(AGENT, fragment(q1, a1, q2))
    assert prompt.blocks == (
        block("system", AGENT, 1560),
        block("system", MEMORY, 209),
        block("user", q1["content"][0], 13),
        block("assistant", a1["content"][0], 130),
        block("user", q2["content"][0], 2),  # 9 x 13 = 117 units
    )
    # After the memory, with its TTL; after the history, Bedrock's default when absent.
    assert prompt.cache_points == ((1, "1h"), (3, "5m"))


def test_a_block_is_known_by_its_role_and_its_content_not_by_its_place():
    assert block_key("user", {"text": "hi"}) == block_key("user", {"text": "hi"})
    assert block_key("user", {"text": "hi"}) != block_key("assistant", {"text": "hi"})
    assert block_key("system", {"text": "hi"}) != block_key("user", {"text": "hi"})
    assert block_key("user", {"text": "hi"}) != block_key("user", {"text": "hi!"})


def test_a_tool_block_counts_its_json_text():
    tool = {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "x" * 100}}}
    (only,) = as_prompt([], [{"role": "assistant", "content": [tool]}]).blocks
    # `{"toolUse":{"toolUseId":"t1","name":"lookup","input":{"q":"x…x"}}}`: 133 letters, a
    # digit and 29 of `"{}[]:,`, where the 100 x's alone are 21 tokens.
    assert only.tokens == -(-(133 * 13 + 32 + 29 * 16) // 64) == 35


def test_a_cache_point_needs_a_block_before_it_and_one_of_its_own():
    with pytest.raises(ValueError, match="before any block"):
        as_prompt([POINT], [])
    with pytest.raises(ValueError, match="after one block"):
        as_prompt([AGENT, POINT, POINT], [])


def test_the_baseline_keeps_only_the_point_after_the_memory():
    served = fragment(*chat(400, "qar"))
    baseline = without_history_points(served)
    assert baseline["system"] == served["system"]
    assert all("cachePoint" not in b for m in baseline["messages"] for b in m["content"])
    assert served["messages"][1]["content"][-1] == POINT  # the answer itself is left as served
    two, one = fragment_prompt(AGENT, served), fragment_prompt(AGENT, baseline)
    assert one.blocks == two.blocks
    assert one.cache_points == ((1, "1h"),)


def test_without_a_memory_the_baseline_has_no_cache_point_at_all():
    served = {"system": [], "messages": [text("user", 8, "q")]}
    assert fragment_prompt(AGENT, without_history_points(served)).cache_points == ()


def transcript(*tokens: int) -> list[BaseMessage]:
    """Alternating messages of these many tokens, the contact's first; each text distinct.

    Each is its index's digit, repeated: a digit costs 32 units, two a token.
    """
    return [
        (HumanMessage if n % 2 == 0 else AIMessage)(content=str(n) * (2 * size))
        for n, size in enumerate(tokens)
    ]


def test_trim_messages_keeps_the_newest_messages_within_the_budget_from_a_question():
    messages = transcript(200, 300, 100, 500, 400, 200, 100)
    # The newest four fit 1,250 tokens (1,200), but the oldest of them is an answer.
    assert estimate_messages(messages[3:]) <= 1250 < estimate_messages(messages[2:])
    kept = trimmed(messages, max_tokens=1250)
    assert [m["content"][0]["text"] for m in kept] == [m.content for m in messages[4:]]
    assert [m["role"] for m in kept] == ["user", "assistant", "user"]
    kept = trimmed(messages, max_tokens=1300)  # now the question before it fits as well
    assert [m["content"][0]["text"] for m in kept] == [m.content for m in messages[2:]]
    assert [m["role"] for m in kept] == ["user", "assistant", "user", "assistant", "user"]


def test_trim_messages_sends_an_oversized_current_message_alone():
    messages = transcript(100, 100, 2000)
    kept = trimmed(messages, max_tokens=1000)
    assert kept == [{"role": "user", "content": [{"text": messages[-1].content}]}]


def test_every_trimmed_prompt_of_a_session_is_within_the_budget_and_starts_on_a_question():
    session = prompt_cost.exchanges(30, "active", seed=3)
    everything = prompt_cost.langchain_transcript(session)
    for n in range(30):
        kept = trimmed(everything[: 2 * n + 1], max_tokens=4000)
        size = estimate_messages([HumanMessage(content=m["content"][0]["text"]) for m in kept])
        assert size <= 4000 or len(kept) == 1
        assert kept[0]["role"] == "user"
        assert kept[-1]["content"][0]["text"] == session[n].question


def test_identical_prefixes_across_two_calls_are_read_from_the_cache():
    q1, a1, q2, a2, q3 = chat(1024, "vwxyz")  # 208 tokens each
    first = fragment_prompt(AGENT, fragment(q1, a1, q2, system_ttl="5m"))
    # Built anew, as the next answer is: equal blocks, not the same objects.
    second = fragment_prompt(AGENT, fragment(q1, a1, q2, a2, q3, system_ttl="5m"))
    cache = PromptCache(CLAUDE_SONNET)
    written = cache.price(first, at=0)
    assert written.write_tokens == 1560 + 209 + 208 + 208
    read = cache.price(second, at=60)
    # The prefix through the first call's history point, found by looking back two blocks.
    assert read.read_tokens == 1560 + 209 + 208 + 208
    assert read.write_tokens == 208 + 208
    assert read.uncached_tokens == 208
    # Past the five minutes it is gone.
    assert PromptCache(CLAUDE_SONNET).price(second, at=0).read_tokens == 0


def test_nova_reads_only_where_a_point_stood_before():
    q1, a1, q2, a2, q3 = chat(4000, "vwxyz")
    cache = PromptCache(NOVA_LITE)
    cache.price(fragment_prompt(AGENT, fragment(q1, a1, q2, system_ttl="5m")), at=0)
    read = cache.price(fragment_prompt(AGENT, fragment(q1, a1, q2, a2, q3, system_ttl="5m")), 60)
    assert read.read_tokens == 1560 + 209  # the memory's point, not the history's


def test_the_unbounded_prompts_are_the_whole_transcript_with_a_point_after_the_last():
    session = [
        Exchange(question=f"question {n} " * 20, asked_at=n, reply=f"reply {n} " * 30, replied_at=n)
        for n in range(3)
    ]
    prompts = prompt_cost.client_side_prompts(AGENT, session, max_tokens=4000)
    messages = [prompt_cost.converse_message(m) for m in prompt_cost.langchain_transcript(session)]
    for n, prompt in enumerate(prompts["unbounded"]):
        expected = as_prompt([AGENT], prompt_cost.with_point_after_the_last(messages[: 2 * n + 1]))
        assert prompt == expected
        assert prompt.cache_points == ((2 * n + 1, "5m"),)
    # Everything fits the budget here: trim_messages keeps it all.
    assert prompts["trim_messages"] == prompts["unbounded"]


def test_the_arrival_patterns_keep_their_pauses():
    for pattern, (low, high) in {"active": (20, 240), "idle": (600, 3600)}.items():
        times = prompt_cost.timings(50, pattern, seed=1)
        assert all(3 <= replied - asked <= 20 for asked, replied in times)
        pauses = [asked - replied for (_, replied), (asked, _) in pairwise(times)]
        assert all(low <= pause <= high for pause in pauses)
    assert prompt_cost.timings(5, "idle", seed=1) == prompt_cost.timings(5, "idle", seed=1)


def test_the_transcript_is_seeded_and_sized_as_chat():
    first = prompt_cost.transcript(200, seed=5)
    assert first == prompt_cost.transcript(200, seed=5)
    asked = [estimate_tokens(q) for q, _ in first]
    replies = [estimate_tokens(r) for _, r in first]
    assert all(20 <= t <= 300 or 1500 <= t <= 4000 for t in asked)
    assert any(t >= 1500 for t in asked)
    assert all(50 <= t <= 600 for t in replies)


@pytest.mark.parametrize("tokens", [0, 1, 2, 20, 299, 1500])
def test_chat_text_is_the_longest_head_of_its_sentences_within_its_tokens(tokens):
    head = prompt_cost.chat_text(random.Random(tokens), tokens)
    longer = prompt_cost.chat_text(random.Random(tokens), tokens + 1)
    assert longer.startswith(head)  # the same sentences, cut later
    assert text_units(head) <= 64 * tokens < text_units(longer[: len(head) + 1])
    # No character of it costs over a token: the longest head within is that many exactly.
    assert estimate_tokens(head) == tokens


def test_a_prompt_without_points_is_priced_whole():
    prompt = Prompt((Block("k", 2000),))
    assert PromptCache(CLAUDE_SONNET).price(prompt, at=0).cost == 2000
