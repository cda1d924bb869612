import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.recall import passage
from memory_core.tokens import estimate_tokens, estimate_turn_tokens
from memory_core.trim import TRIMMED_INPUT_KEY, TrimShape, omission_marker, trim_turn
from memory_core.turns import Turn
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn

MARKER = re.compile(r"… (\d+) tokens omitted …")
MATCH = "Clause 7.2: the indemnity cap is ten million euros."
FILLER = [
    "the",
    "order",
    "was",
    "shipped",
    "on",
    "monday",
    "and",
    "the",
    "invoice",
    "lists",
    "three",
    "items",
    "but",
    "two",
    "arrived",
]


def filler_lines(count: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [f"{n:04d} " + " ".join(rng.choice(FILLER) for _ in range(12)) for n in range(count)]


def document(match_line: int | None, lines: int = 400) -> str:
    body = filler_lines(lines)
    if match_line is not None:
        body[match_line] = MATCH
    return "\n".join(body)


def one_text(body: str) -> Turn:
    return turn(Clock(), "user", text(body))


def same_turn_apart_from_content(cut: Turn, whole: Turn) -> None:
    assert (cut.id, cut.role, cut.sent_at, cut.recorded_at, cut.stated_sent_at) == (
        whole.id,
        whole.role,
        whole.sent_at,
        whole.recorded_at,
        whole.stated_sent_at,
    )


def markers(cut_text: str) -> list[int]:
    return [int(count) for count in MARKER.findall(cut_text)]


def test_a_short_turn_comes_back_as_it_is():
    short = one_text(MATCH)
    assert passage(short, "indemnity", 100) is short


def test_a_turn_at_the_budget_comes_back_whole_and_one_token_over_is_cut():
    whole = one_text(document(30, lines=60))
    at = estimate_turn_tokens(whole)
    assert passage(whole, "indemnity", at) is whole
    cut = passage(whole, "indemnity", at - 1)
    assert cut is not whole
    assert estimate_turn_tokens(cut) <= at - 1
    assert "indemnity" in cut.content[0]["text"]


def test_a_long_turn_keeps_its_match_in_the_middle_with_markers_that_add_up():
    original = document(200)
    whole = one_text(original)
    cut = passage(whole, "indemnity cap", 200)
    same_turn_apart_from_content(cut, whole)
    assert estimate_turn_tokens(whole) > 2000
    assert estimate_turn_tokens(cut) <= 200
    # Nearly all of the budget is used.
    assert estimate_turn_tokens(cut) >= 180
    lines = cut.content[0]["text"].split("\n")
    head, tail = markers(lines[0]), markers(lines[-1])
    assert lines[0] == omission_marker(head[0])
    assert lines[-1] == omission_marker(tail[0])
    kept = "\n".join(lines[1:-1])
    assert MATCH in lines
    # Cut at line breaks, the match about the middle.
    before, after = original.split(kept)
    assert before.endswith("\n")
    assert after.startswith("\n")
    assert abs(lines.index(MATCH) - len(lines) / 2) <= 3
    # Each marker counts what it stands for; with the kept text, the whole.
    assert head[0] == estimate_tokens(before)
    assert tail[0] == estimate_tokens(after)
    assert abs(head[0] + estimate_tokens(kept) + tail[0] - estimate_tokens(original)) <= 2


def test_a_match_at_the_start_is_cut_after_it_only():
    original = document(0)
    cut = passage(one_text(original), "indemnity", 150)
    kept_text = cut.content[0]["text"]
    assert kept_text.startswith(MATCH)
    # All the context after: the budget is nearly all used.
    assert 135 <= estimate_turn_tokens(cut) <= 150
    *kept, last = kept_text.split("\n")
    assert last == omission_marker(markers(last)[0])
    assert markers("\n".join(kept)) == []
    assert original.startswith("\n".join(kept) + "\n")


def test_a_match_at_the_end_is_cut_before_it_only():
    original = document(399)
    cut = passage(one_text(original), "indemnity", 150)
    kept_text = cut.content[0]["text"]
    assert kept_text.endswith(MATCH)
    # All the context before: the budget is nearly all used.
    assert 135 <= estimate_turn_tokens(cut) <= 150
    first, *kept = kept_text.split("\n")
    assert first == omission_marker(markers(first)[0])
    assert markers("\n".join(kept)) == []
    assert original.endswith("\n" + "\n".join(kept))


def test_a_long_turn_without_a_match_keeps_its_head_and_tail_as_the_trim_does():
    whole = one_text(document(None))
    assert passage(whole, "zeppelin", 1000) == trim_turn(whole, TrimShape.for_budget(1000))


def test_without_a_match_a_small_budget_shortens_head_and_tail_to_fit():
    original = document(None)
    whole = one_text(original)
    # The trim's own shape for 300 tokens (150 + 150) is over by its marker line.
    assert estimate_turn_tokens(trim_turn(whole, TrimShape.for_budget(300))) > 300
    cut = passage(whole, "zeppelin", 300)
    assert 290 <= estimate_turn_tokens(cut) <= 300
    kept = cut.content[0]["text"]
    [omitted] = markers(kept)
    head, tail = kept.split("\n" + omission_marker(omitted) + "\n")
    assert original.startswith(head)
    assert original.endswith(tail)
    assert abs(len(head) - len(tail)) < 20


def test_a_tool_call_and_a_tool_result_are_cut_as_the_trim_cuts_them():
    clock = Clock()
    long_input = document(150)
    call = turn(
        clock,
        "assistant",
        text("Searching the contract."),
        tool_use("c1", "search", doc=long_input),
    )
    cut = passage(call, "indemnity", 250)
    assert estimate_turn_tokens(cut) <= 250
    said, use = cut.content
    # Far from the match, the short text is cut too: its marker says what it was worth.
    assert said == {"text": omission_marker(estimate_tokens("Searching the contract."))}
    assert (use["toolUse"]["toolUseId"], use["toolUse"]["name"]) == ("c1", "search")
    [trimmed] = use["toolUse"]["input"].values()
    assert list(use["toolUse"]["input"]) == [TRIMMED_INPUT_KEY]
    assert "indemnity cap" in trimmed
    assert len(markers(trimmed)) == 2

    answer = turn(clock, "user", tool_result("c1", document(300)))
    cut = passage(answer, "indemnity", 250)
    assert estimate_turn_tokens(cut) <= 250
    [item] = cut.content[0]["toolResult"]["content"]
    assert cut.content[0]["toolResult"]["toolUseId"] == "c1"
    assert MATCH in item["text"].split("\n")


def test_a_long_block_far_from_the_match_is_left_as_its_marker():
    clock = Clock()
    far = document(None, lines=200)
    near = document(100, lines=200)
    both = turn(clock, "user", text(far), tool_result("c1", near))
    cut = passage(both, "indemnity", 200)
    assert estimate_turn_tokens(cut) <= 200
    assert cut.content[0] == {"text": omission_marker(estimate_tokens(far))}
    assert MATCH in cut.content[1]["toolResult"]["content"][0]["text"]


def test_the_densest_stretch_wins_over_a_lone_hit():
    lines = filler_lines(400)
    lines[50] = "the indemnity is mentioned once here"
    lines[300] = "indemnity cap: the cap on indemnity is the indemnity cap"
    cut = passage(one_text("\n".join(lines)), "indemnity cap", 120)
    assert lines[300] in cut.content[0]["text"]
    assert lines[50] not in cut.content[0]["text"]


def test_a_query_in_another_script_is_found_where_folding_moves_characters():
    # ß folds to ss: the text's characters are placed word by word.
    body = " ".join(["Straße"] * 1500) + " Vertragsklausel " + " ".join(["Straße"] * 1500)
    cut = passage(one_text(body), "VERTRAGSKLAUSEL", 120)
    assert "Vertragsklausel" in cut.content[0]["text"]
    assert estimate_turn_tokens(cut) <= 120


def test_a_budget_below_a_token_is_a_callers_bug():
    with pytest.raises(ValueError, match="at least a token"):
        passage(one_text(MATCH), "clause", 0)


# --- Any long text, any match -----------------------------------------------------------

VOCABULARY = [
    *FILLER,
    "Straße",
    "ﬁnal",
    "résumé",
    "договор",
    "σύμβαση",
    "中文合同",
    "計算",
    "계약서를",
    "हिन्दी",
    "7.2",
    "INV-2031",
    '"quoted"',
    "tab\there",
    "✅",
]
NEEDLES = ["zebracorn", "契約書", "Vertragsklausel", "INV-7781"]


@st.composite
def long_turns(draw: Any) -> tuple[Turn, str]:
    """A turn with a long text somewhere in its blocks, a needle placed at random in it."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    size = draw(st.integers(300, 4000))
    words = [rng.choice(VOCABULARY) for _ in range(size)]
    lines = draw(st.sampled_from([0.0, 0.02, 0.2]))  # how often a word ends a line
    for n in range(len(words)):
        if rng.random() < lines:
            words[n] += "\n"
    needle = draw(st.sampled_from(NEEDLES))
    words.insert(draw(st.integers(0, len(words))), needle)
    body = " ".join(words)
    clock = Clock()
    shape = draw(st.sampled_from(["text", "tool input", "tool result", "text and result"]))
    if shape == "text":
        return turn(clock, "user", text(body)), needle
    if shape == "tool input":
        return turn(clock, "assistant", text("Looking."), tool_use("c1", "find", q=body)), needle
    if shape == "tool result":
        return turn(clock, "user", tool_result("c1", body)), needle
    other = " ".join(rng.choice(FILLER) for _ in range(draw(st.integers(0, 2000))))
    if draw(st.booleans()):
        return turn(clock, "user", text(other), tool_result("c1", body)), needle
    return turn(clock, "user", tool_result("c1", body), text(other)), needle


def every_text(content: Any) -> str:
    return repr(content)


@settings(max_examples=150)
@given(long_turns(), st.integers(100, 800))
def test_any_passage_holds_the_match_within_the_budget(case, max_tokens):
    whole, needle = case
    cut = passage(whole, needle.upper(), max_tokens)
    same_turn_apart_from_content(cut, whole)
    assert estimate_turn_tokens(cut) <= max_tokens
    assert needle in every_text(cut.content)
    if estimate_turn_tokens(whole) <= max_tokens:
        assert cut is whole
