"""The bench's model of Bedrock's prompt cache, on cases priced by hand."""

import pytest

from bench.bedrock_cache import CLAUDE_SONNET, NOVA_LITE, Block, CacheModel, Prompt, PromptCache

SMALL = CacheModel(
    "test", read=0.1, write=1.25, write_1h=2.0, minimum_tokens=100, lookback_blocks=2
)


def prompt(*tokens: int, points=(), prefix="b") -> Prompt:
    blocks = tuple(Block(f"{prefix}{n}", t) for n, t in enumerate(tokens))
    return Prompt(blocks, tuple((index, "5m") for index in points))


def test_without_cache_points_every_token_is_input():
    priced = PromptCache(SMALL).price(prompt(300, 200), at=0)
    assert (priced.read_tokens, priced.write_tokens, priced.uncached_tokens) == (0, 0, 500)
    assert priced.cost == 500


def test_a_first_request_writes_its_prefix_and_a_second_reads_it():
    cache = PromptCache(SMALL)
    first = cache.price(prompt(300, 200, points=[0]), at=0)
    assert (first.write_tokens, first.uncached_tokens, first.cost) == (300, 200, 300 * 1.25 + 200)
    second = cache.price(prompt(300, 200, points=[0]), at=10)
    assert (second.read_tokens, second.cost) == (300, 300 * 0.1 + 200)


def test_a_prefix_under_the_minimum_is_not_cached():
    cache = PromptCache(SMALL)
    assert cache.price(prompt(99, 200, points=[0]), at=0).cost == 299
    assert cache.price(prompt(99, 200, points=[0]), at=1).read_tokens == 0
    # Exactly at the minimum it is.
    cache.price(prompt(100, 200, points=[0], prefix="c"), at=2)
    assert cache.price(prompt(100, 200, points=[0], prefix="c"), at=3).read_tokens == 100


def test_the_ttl_runs_from_the_last_hit():
    cache = PromptCache(SMALL)
    cache.price(prompt(300, 10, points=[0]), at=0)
    assert cache.price(prompt(300, 10, points=[0]), at=299).read_tokens == 300
    assert cache.price(prompt(300, 10, points=[0]), at=598).read_tokens == 300  # reset at 299
    assert cache.price(prompt(300, 10, points=[0]), at=898).read_tokens == 0  # 300 s later: gone


def test_an_hour_ttl_costs_more_to_write_and_lasts_longer():
    cache = PromptCache(SMALL)
    hour = Prompt((Block("a", 300), Block("b", 10)), ((0, "1h"),))
    assert cache.price(hour, at=0).cost == 300 * 2.0 + 10
    assert cache.price(hour, at=3000).read_tokens == 300


def test_two_cache_points_write_between_the_hit_and_the_last():
    cache = PromptCache(SMALL)
    cache.price(prompt(300, 100, points=[0]), at=0)
    priced = cache.price(prompt(300, 100, 50, points=[0, 1]), at=1)
    assert (priced.read_tokens, priced.write_tokens, priced.uncached_tokens) == (300, 100, 50)
    assert priced.cost == pytest.approx(30 + 125 + 50)


def test_a_changed_block_before_the_point_misses():
    cache = PromptCache(SMALL)
    cache.price(prompt(300, 100, points=[1]), at=0)
    changed = Prompt((Block("b0", 300), Block("other", 100)), ((1, "5m"),))
    assert cache.price(changed, at=1).read_tokens == 0


def test_lookback_finds_an_earlier_point_within_reach_only():
    cache = PromptCache(SMALL)
    cache.price(prompt(300, 10, 10, 10, 10, points=[0]), at=0)
    # The point moved two blocks on: the old prefix is within the lookback of 2.
    within = cache.price(prompt(300, 10, 10, 10, 10, points=[2]), at=1)
    assert (within.read_tokens, within.write_tokens) == (300, 20)
    far = PromptCache(SMALL)
    far.price(prompt(300, 10, 10, 10, 10, points=[0]), at=0)
    beyond = far.price(prompt(300, 10, 10, 10, 10, points=[3]), at=1)
    assert (beyond.read_tokens, beyond.write_tokens) == (0, 330)


def test_nova_has_no_lookback_and_no_write_surcharge():
    cache = PromptCache(NOVA_LITE)
    first = cache.price(prompt(2000, 100, points=[0]), at=0)
    assert first.cost == 2100
    moved = cache.price(prompt(2000, 100, 100, points=[1]), at=1)
    assert moved.read_tokens == 0
    assert cache.price(prompt(2000, 100, points=[0]), at=2).cost == pytest.approx(2000 * 0.25 + 100)


def test_claude_facts():
    assert (CLAUDE_SONNET.read, CLAUDE_SONNET.write, CLAUDE_SONNET.write_1h) == (0.1, 1.25, 2.0)
    assert (CLAUDE_SONNET.minimum_tokens, CLAUDE_SONNET.lookback_blocks) == (1024, 20)


def test_more_than_four_cache_points_are_refused():
    with pytest.raises(ValueError, match="4"):
        PromptCache(SMALL).price(prompt(*[10] * 6, points=[0, 1, 2, 3, 4]), at=0)
