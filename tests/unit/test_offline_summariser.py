"""The offline summariser over many folds: every stretch stays, older ones compressed more.

The compactor folds the turns it has not folded yet onto the previous
summary, a few at a time; the local runner uses this summariser. After 60
exchanges the memory must still say something of the first ones and of
each tenth, within the cap, with every cut visible.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.summariser import OfflineSummariser, Summary, transcript
from memory_core.settings import load_settings
from memory_core.tokens import (
    PUNCTUATION_UNITS,
    estimate_tokens,
    text_units,
    units_to_tokens,
)
from memory_core.turns import Role, Turn
from tests.unit.conversation_builders import Clock, text, turn

DEFAULT_CAP = load_settings({}).memory_summary_max_tokens
SMALL_CAP = 200
TOPIC = re.compile(r"topic-(\d\d)\b")
LABEL = re.compile(r"\[(?P<dates>[^\]]*?)(?:, (?P<turns>\d+) turns?)?\]")
STAMP = "%Y-%m-%d %H:%M"
FIRST_SENTENCE = re.compile(r".*?[.!?](?= |$)")


@dataclass(frozen=True)
class Stretch:
    label: str
    turns: int
    lines: list[str]

    @property
    def body(self) -> str:
        return "\n".join(self.lines)

    @property
    def cut(self) -> bool:
        return "…" in self.body

    @property
    def dates(self) -> tuple[str, str]:
        label = LABEL.fullmatch(self.label)
        assert label is not None
        start, _, end = label["dates"].partition(" – ")
        if not end and "–" in start:  # the same day: `2026-11-01 09:01–09:40`
            start, _, time = start.partition("–")
            end = start[:11] + time
        return start, end or start


def stretches(summary: str) -> list[Stretch]:
    """The summary's stretches, each a label with a turn count and its lines."""
    found: list[Stretch] = []
    for line in summary.splitlines():
        label = LABEL.fullmatch(line)
        if label and label["turns"]:
            found.append(Stretch(line, int(label["turns"]), []))
        else:
            assert found, f"a line before any label: {line!r}"
            found[-1].lines.append(line)
    return found


def conversation(exchanges: int) -> list[Turn]:
    """Question and answer, each exchange naming its own topic first."""
    clock = Clock(step=timedelta(minutes=7))
    turns = []
    for n in range(exchanges):
        turns.append(
            turn(
                clock,
                "user",
                text(
                    f"topic-{n:02d} question: can clause {n} of the lease change before "
                    "the renewal date? I need to know before I sign anything."
                ),
            )
        )
        turns.append(
            turn(
                clock,
                "assistant",
                text(
                    f"topic-{n:02d} answer: yes, clause {n} can change if both parties sign "
                    "a written amendment first. The details follow in a letter."
                ),
            )
        )
    return turns


def folds(
    turns: Sequence[Turn], batches: Sequence[int], cap: int, previous: str | None = None
) -> list[tuple[int, Summary]]:
    """As the compactor folds: each batch onto the previous summary; the turns folded so far."""
    summariser = OfflineSummariser()
    done: list[tuple[int, Summary]] = []
    start = 0
    while start < len(turns):
        batch = turns[start : start + batches[len(done) % len(batches)]]
        summary = summariser.summarise(previous, batch, cap)
        start += len(batch)
        done.append((start, summary))
        previous = summary.text
    return done


def topics(text: str) -> set[int]:
    return {int(n) for n in TOPIC.findall(text)}


def assert_every_turn_is_labelled(summary: str, folded: Sequence[Turn]) -> None:
    found = stretches(summary)
    assert sum(stretch.turns for stretch in found) == len(folded)
    assert found[0].dates[0] == f"{folded[0].sent_at:{STAMP}}"
    assert found[-1].dates[1] == f"{folded[-1].sent_at:{STAMP}}"


def speaker(t: Turn) -> str:
    return "Contact" if t.role == "user" else "Agent"


def first_sentence(body: str) -> str:
    sentence = FIRST_SENTENCE.match(body)
    assert sentence is not None
    return sentence.group()


def assert_points_are_extracts_cut_visibly(summary: str, folded: Sequence[Turn]) -> None:
    """Each point is its turn's first sentence, or that sentence's start and "…"."""
    whole = {f"{speaker(t)}: {first_sentence(t.content[0]['text'])}" for t in folded}
    for stretch in stretches(summary):
        for line in stretch.lines:
            point = line.removeprefix("- ").removeprefix("… ")
            if point == "…":
                continue
            shortened = point.endswith("…") and any(
                p.startswith(point[:-1]) and p != point[:-1] for p in whole
            )
            assert point in whole or shortened, line


def assert_older_turns_get_no_more_room(summary: str) -> None:
    """A cut stretch shows no more characters a turn than any newer stretch cut too."""
    found = stretches(summary)
    for n, older in enumerate(found):
        for newer in found[n + 1 :]:
            if older.cut and newer.cut:
                assert len(older.body) / older.turns <= len(newer.body) / newer.turns, summary


# Early-content coverage after many folds.

BATCHES = [(4, 6, 8), (5, 7), (4,), (8,), (13,)]


@pytest.mark.parametrize("batches", BATCHES)
@pytest.mark.parametrize("cap", [DEFAULT_CAP, SMALL_CAP])
def test_after_60_exchanges_every_stretch_is_still_in_the_memory(cap, batches):
    turns = conversation(60)
    history = folds(turns, batches, cap)
    memory = history[-1][1].text
    assert "topic-00" in memory  # the first exchange
    assert "topic-59" in memory
    # At the default cap something of each tenth; at a quarter of it, of each third.
    parts = 6 if cap == DEFAULT_CAP else 3
    shown = {n * parts // 60 for n in topics(memory)}
    assert shown == set(range(parts)), memory
    for folded, summary in history:
        assert estimate_tokens(summary.text) <= cap
        assert summary.output_tokens == estimate_tokens(summary.text)
        assert_every_turn_is_labelled(summary.text, turns[:folded])
        assert_points_are_extracts_cut_visibly(summary.text, turns[:folded])
        assert_older_turns_get_no_more_room(summary.text)
    for stretch in stretches(memory):
        assert topics(stretch.body), f"{stretch.label} shows no point"


def test_the_oldest_turns_are_compressed_most_and_counted_still():
    turns = conversation(60)
    memory = folds(turns, (4, 6, 8), DEFAULT_CAP)[-1][1].text
    found = stretches(memory)
    assert len(found) >= 2
    oldest, newest = found[0], found[-1]
    assert len(oldest.body) / oldest.turns < len(newest.body) / newest.turns / 2
    # Each older stretch stands for at least twice the turns of the next newer one.
    for older, newer in pairwise(found[:-1]):
        assert older.turns >= 2 * newer.turns
    assert oldest.cut  # and says so
    assert not newest.cut


def test_points_left_out_are_marked_where_they_were():
    turns = conversation(60)
    for _, summary in folds(turns, (6,), SMALL_CAP):
        for stretch in stretches(summary.text):
            points = [line for line in stretch.lines if line != "- …"]
            if len(points) < stretch.turns:
                assert any(line.startswith("- …") for line in stretch.lines), summary.text


def test_the_folds_are_deterministic():
    turns = conversation(30)
    assert folds(turns, (4, 6, 8), SMALL_CAP) == folds(turns, (4, 6, 8), SMALL_CAP)


def test_non_latin_turns_are_compressed_within_the_cap():
    clock = Clock(step=timedelta(minutes=3))
    turns = [
        turn(clock, "user", text(f"第{n}条の変更について質問です。" + "契約" * 400))
        for n in range(80)
    ]
    history = folds(turns, (5,), 60)
    for folded, summary in history:
        assert estimate_tokens(summary.text) <= 60
        assert_every_turn_is_labelled(summary.text, turns[:folded])
    memory = history[-1][1].text
    assert "第0条" in memory
    assert "第79条" in memory


# The format is re-read, including summaries it did not write.


def test_a_summary_written_otherwise_becomes_an_earlier_stretch():
    hello = turn(Clock(), "user", text("Hi."))
    previous = "Counsel asked about clause 7 fees.\nThe fee is 1,200 EUR."
    summary = OfflineSummariser().summarise(previous, [hello], 800)
    assert summary.text == (
        "[earlier]\n- Counsel asked about clause 7 fees.\n- The fee is 1,200 EUR.\n"
        "[2026-11-01 09:01, 1 turn]\n- Contact: Hi."
    )
    assert summary.input_tokens == estimate_tokens(previous) + estimate_tokens(transcript([hello]))


def test_the_format_it_wrote_before_is_read_as_an_earlier_stretch():
    clock = Clock()
    previous = "(earlier points omitted)\n- 2026-10-30 10:00: Contact: The fee is 1,200 EUR"
    summary = OfflineSummariser().summarise(previous, [turn(clock, "user", text("Hi."))], 800)
    assert summary.text.splitlines()[:3] == [
        "[earlier]",
        "- … 2026-10-30 10:00: Contact: The fee is 1,200 EUR",
        "[2026-11-01 09:01, 1 turn]",
    ]


def test_a_stretch_of_several_days_is_labelled_with_both_dates():
    clock = Clock(step=timedelta(hours=20))
    turns = [turn(clock, "user", text(f"Message {n}.")) for n in range(3)]
    summary = OfflineSummariser().summarise(None, turns, 800).text
    assert summary.splitlines()[0] == "[2026-11-02 05:00 – 2026-11-03 21:00, 3 turns]"


# At the cap exactly, and one character over.

LABEL_AND_SPEAKER = "[2026-11-01 09:01, 1 turn]\n- Contact: "
"""852 units: 13 digits at 32, 3 hyphens at 64, 11 letters at 13, `[`, `]`, `:` twice, `,`
and a newline at 16, 5 spaces at 1."""
AT_CAP = 50
# Beside them, 50 x 64 - 852 = 2,348 units: single letters, each with a space after it,
# then the rest of the letters as one word.
AT_CAP_BODIES = [("x", 180, 8), ("語", 36, 8)]  # 180 x 13 + 8 and 36 x 65 + 8


def body_at_cap(letter: str, letters: int, spaces: int) -> str:
    return f"{letter} " * spaces + letter * (letters - spaces)


def test_the_label_and_speaker_cost_as_counted():
    units = 13 * 32 + 3 * 64 + 11 * 13 + 6 * 16 + 5 * 1
    assert text_units(LABEL_AND_SPEAKER) == units == 852


@pytest.mark.parametrize(("letter", "letters", "spaces"), AT_CAP_BODIES)
def test_a_summary_exactly_at_its_cap_is_kept_whole(letter, letters, spaces):
    body = body_at_cap(letter, letters, spaces)
    summary = OfflineSummariser().summarise(None, [turn(Clock(), "user", text(body))], AT_CAP)
    assert summary.text == LABEL_AND_SPEAKER + body
    assert summary.output_tokens == estimate_tokens(summary.text) == AT_CAP


@pytest.mark.parametrize(
    ("letter", "letters", "spaces", "cut"),
    # One letter over, and "…" (15 units) for the cut: 3 x's (39 units) or 2 語 (130) go.
    [("x", 180, 8, 3), ("語", 36, 8, 2)],
)
def test_a_summary_one_character_over_its_cap_is_cut_visibly(letter, letters, spaces, cut):
    body = body_at_cap(letter, letters, spaces) + letter
    summary = OfflineSummariser().summarise(None, [turn(Clock(), "user", text(body))], AT_CAP)
    assert summary.text == LABEL_AND_SPEAKER + body[:-cut] + "…"
    assert estimate_tokens(summary.text) <= AT_CAP


def test_a_fold_onto_a_summary_at_its_cap_keeps_both_stretches():
    # The older stretch stays apart while its share holds four shortest points (120
    # characters) beside both labels (663 units each) and the newer point. At 50 tokens a
    # body of x's leaves it too little and the two merge; at 150, a body of 語 and spaces
    # (150 x 64 - 852 = 8,748 units: 134 x 65 + 38) leaves it enough.
    cap = 150
    clock = Clock()
    body = body_at_cap("語", 134, 38)
    summariser = OfflineSummariser()
    first = summariser.summarise(None, [turn(clock, "user", text(body))], cap)
    assert estimate_tokens(first.text) == cap
    due = turn(clock, "assistant", text("Due 15 March."))
    second = summariser.summarise(first.text, [due], cap)
    assert estimate_tokens(second.text) <= cap
    assert [s.label for s in stretches(second.text)] == [
        "[2026-11-01 09:01, 1 turn]",
        "[2026-11-01 09:02, 1 turn]",
    ]
    assert "…" in second.text
    assert second.text.endswith("- Agent: Due 15 March.")


# Any text, any batches, any cap: within the cap and deterministic.

MIN_STRUCTURED = OfflineSummariser.MIN_STRUCTURED_TOKENS

texts = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40).map(lambda s: s * 50),
    st.builds(lambda letter, n: letter * n, st.characters(codec="utf-8"), st.integers(1, 40_000)),
    st.sampled_from(["", " ", "\n\n", "…", "- …", "[2026-11-01 09:01, 1 turn]", "。" * 300]),
)


@st.composite
def foldings(draw: st.DrawFn) -> tuple[list[Turn], list[int]]:
    count = draw(st.integers(1, 40))
    at = datetime(2026, 11, 1, tzinfo=UTC)
    turns: list[Turn] = []
    for n in range(count):
        at += draw(st.sampled_from([timedelta(0), timedelta(minutes=1), timedelta(days=2)]))
        role: Role = draw(st.sampled_from(["user", "assistant"]))
        content = [] if draw(st.booleans()) and n % 7 == 3 else [{"text": draw(texts)}]
        turns.append(Turn(f"t{n:03d}", role, content, at))
    batches = draw(st.lists(st.integers(1, 12), min_size=1, max_size=6))
    return turns, batches


@settings(max_examples=150)
@given(foldings(), st.integers(1, 1200), st.none() | texts)
def test_any_conversation_folds_within_the_cap_deterministically(folding, cap, written_otherwise):
    turns, batches = folding
    history = folds(turns, batches, cap, written_otherwise)
    assert history == folds(turns, batches, cap, written_otherwise)
    for _, summary in history:
        assert estimate_tokens(summary.text) <= cap
        assert summary.output_tokens == estimate_tokens(summary.text)


def structured_minimum(turns: Sequence[Turn]) -> int:
    """MIN_STRUCTURED, and what a shortest point (24 characters) costs more in the turns'
    costliest script: the minimum counts each of its characters at a punctuation mark's
    units, the costliest ASCII character's."""
    letters = {letter for t in turns for block in t.content for letter in block.get("text", "")}
    heaviest = max((text_units(letter) for letter in letters), default=PUNCTUATION_UNITS)
    return MIN_STRUCTURED + units_to_tokens(24 * max(0, heaviest - PUNCTUATION_UNITS))


@settings(max_examples=150)
@given(foldings(), st.integers(0, 1200 - MIN_STRUCTURED))
def test_from_the_minimum_cap_every_folded_turn_is_labelled_and_every_stretch_shown(folding, over):
    turns, batches = folding
    cap = structured_minimum(turns) + over
    for folded, summary in folds(turns, batches, cap):
        assert_every_turn_is_labelled(summary.text, turns[:folded])
        for stretch in stretches(summary.text):
            assert any(line != "- …" for line in stretch.lines), summary.text


def test_the_minimum_cap_is_what_the_costliest_label_and_a_shortest_point_cost():
    label = "[2026-11-01 09:01 – 2026-11-03 21:00, 99999 turns]"
    # 29 digits, 4 hyphens, `[`, `]`, `,` and two `:`, `turns`, `–`, 6 spaces.
    assert text_units(label) == 29 * 32 + 4 * 64 + 5 * 16 + 5 * 13 + 15 + 6 * 1 == 1350
    # A point of 24 punctuation marks after a gap (97 units), and a gap (96): 3,079 units,
    # 7 over 48 tokens.
    assert MIN_STRUCTURED == -(-(1350 + 97 + 24 * 64 + 96) // 64) == 49
    previous = f"{label}\n- … {'!' * 24}\n- …"
    assert OfflineSummariser().summarise(previous, [], MIN_STRUCTURED).text == previous
    # A token under, the point does not fit whole and is not shortened below 24 characters.
    under = OfflineSummariser().summarise(previous, [], MIN_STRUCTURED - 1)
    assert under.text == f"{label}\n- …"
