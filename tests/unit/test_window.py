from collections.abc import Iterator

from memory_core.tokens import estimate_turn_tokens
from memory_core.turns import Turn
from memory_core.window import build_window
from tests.unit.conversation_builders import (
    Clock,
    alternating,
    chars,
    default_limits,
    ids,
    text,
    tool_result,
    tool_use,
    turn,
    window_of,
)


def test_an_empty_history_gives_an_empty_window():
    window = window_of([])
    assert (window.kept, window.dropped, window.estimated_tokens) == (0, 0, 0)


def test_a_short_conversation_is_kept_whole():
    history = alternating(Clock(), 6)
    window = window_of(history)
    assert ids(window.turns) == ids(history)
    assert window.dropped == 0


def test_a_25_cap_over_short_alternating_turns_keeps_24_and_starts_on_a_question():
    history = alternating(Clock(), 60)
    window = window_of(history)
    assert window.kept == 24
    assert window.turns[0].is_question
    assert ids(window.turns) == ids(history[-24:])
    assert window.dropped == 36


def test_a_window_capped_at_ten_never_passes_more_than_ten():
    limits = default_limits(HISTORY_WINDOW_MAX_MESSAGES="10", HISTORY_WINDOW_FLOOR_MESSAGES="10")
    history = alternating(Clock(), 40)
    window = window_of(history, limits)
    assert window.kept == 10
    assert ids(window.turns) == ids(history[-10:])


def test_the_floor_is_kept_when_ten_messages_alone_exceed_the_budget():
    history = alternating(Clock(), 30, tokens_each=900)
    window = window_of(history)
    assert window.kept == 10
    assert window.estimated_tokens == 9000  # over the 4000 budget, kept all the same
    assert window.trimmed == 0


def test_a_fourth_pair_that_would_cross_4000_is_left_out_whole():
    limits = default_limits(HISTORY_WINDOW_FLOOR_MESSAGES="2")
    history = alternating(Clock(), 10, tokens_each=600)
    window = window_of(history, limits)
    assert window.kept == 6
    assert window.estimated_tokens == 3600
    assert ids(window.turns) == ids(history[-6:])


def test_an_exchange_that_lands_exactly_on_the_budget_fits():
    limits = default_limits(HISTORY_WINDOW_FLOOR_MESSAGES="2")
    history = alternating(Clock(), 8, tokens_each=500)
    window = window_of(history, limits)
    assert window.estimated_tokens == 4000
    assert window.kept == 8


def test_the_floor_moves_outward_to_land_on_a_question():
    limits = default_limits(HISTORY_WINDOW_MAX_MESSAGES="13")
    clock = Clock()
    older = alternating(clock, 4)
    question = turn(clock, "user", text("What does clause 7 say?"))
    steps: list[Turn] = []
    for n in range(5):
        steps.append(turn(clock, "assistant", tool_use(f"c{n}", clause=7)))
        steps.append(turn(clock, "user", tool_result(f"c{n}", "text of the clause")))
    answer = turn(clock, "assistant", text("Clause 7 says..."))
    window = window_of([*older, question, *steps, answer], limits)
    # The newest ten start on a tool result; the edge moves out to the question,
    # and the older pair would break the cap of 13.
    assert ids(window.turns) == ids([question, *steps, answer])


def test_where_landing_on_a_question_would_break_the_cap_the_unfinished_exchange_is_dropped():
    limits = default_limits(HISTORY_WINDOW_MAX_MESSAGES="10", HISTORY_WINDOW_FLOOR_MESSAGES="10")
    clock = Clock()
    history = [*alternating(clock, 20), turn(clock, "user", text("still there?"))]
    # The newest ten are answer, question, ..., question: the oldest is an answer.
    window = window_of(history, limits)
    assert window.kept == 9
    assert window.turns[0].is_question
    assert ids(window.turns) == ids(history[-9:])


def test_a_history_that_begins_with_answers_never_starts_on_one():
    clock = Clock()
    greeting = turn(clock, "assistant", text("Hello! How can I help?"))
    history = [greeting, *alternating(clock, 4)]
    window = window_of(history)
    assert ids(window.turns) == ids(history[1:])
    assert window.dropped == 1


def test_a_tool_result_is_never_separated_from_its_tool_use():
    limits = default_limits(HISTORY_WINDOW_FLOOR_MESSAGES="2", HISTORY_WINDOW_MAX_MESSAGES="4")
    clock = Clock()
    question = turn(clock, "user", text("look it up"))
    call = turn(clock, "assistant", tool_use("c1", q="x"))
    # A user turn that returns a tool result is no question, even with text in it.
    result = turn(clock, "user", tool_result("c1", "found"), text("and also this"))
    answer = turn(clock, "assistant", text("done"))
    window = window_of([question, call, result, answer], limits)
    assert ids(window.turns) == ids([question, call, result, answer])


def test_long_history_messages_are_trimmed_and_counted_at_their_trimmed_size():
    clock = Clock()
    history = [
        turn(clock, "user", text(chars(10))),
        turn(clock, "assistant", text(chars(5000))),
        turn(clock, "user", text(chars(10))),
        turn(clock, "assistant", text(chars(10))),
    ]
    window = window_of(history)
    assert window.trimmed == 1
    # 5,000 tokens of "x" are 24,615 letters (13 units each); head and tail keep 400
    # tokens, 1,969 letters each: the 20,677 letters cut cost 268,801 units, 4,201 tokens.
    omitted = -(-(24_615 - 2 * 1969) * 13 // 64)
    assert omitted == 4201
    assert f"… {omitted} tokens omitted …" in window.turns[1].content[0]["text"]
    # Head and tail, the marker (two "…", four digits, 13 letters, four spaces) and its
    # two line breaks: 51,557 units, 806 tokens.
    trimmed_units = 2 * 1969 * 13 + (2 * 15 + 4 * 32 + 13 * 13 + 4) + 2 * 16
    assert window.turn_tokens == (10, -(-trimmed_units // 64), 10, 10) == (10, 806, 10, 10)
    assert window.estimated_tokens == sum(estimate_turn_tokens(t) for t in window.turns)
    assert window.estimated_tokens < 1000


def test_the_window_reads_lazily_and_stops_early():
    limits = default_limits()
    pulled = 0

    def endless() -> Iterator[Turn]:
        nonlocal pulled
        clock = Clock()
        while True:
            pulled += 1
            yield turn(clock, "assistant" if pulled % 2 else "user", text("short"))

    window = build_window(endless(), limits)
    assert window.kept == 24
    assert pulled <= limits.max_messages + 1


def test_dropped_counts_every_candidate_left_out_when_the_count_is_known():
    history = alternating(Clock(), 1000)
    window = build_window(reversed(history), default_limits(), candidate_count=1000)
    assert window.dropped == 1000 - 24
    unknown = build_window(reversed(history), default_limits())
    assert unknown.dropped == len(unknown.passed_over)


def test_the_window_reports_what_it_read_but_did_not_keep():
    history = alternating(Clock(), 40)
    window = window_of(history)
    assert ids(window.passed_over) == ids(reversed(history[:-24]))[: len(window.passed_over)]
    assert window.passed_over
    assert window.oldest_position == history[-24].position


def test_turns_the_floor_gave_up_are_never_skipped_over_to_reach_older_ones():
    limits = default_limits(HISTORY_WINDOW_MAX_MESSAGES="10", HISTORY_WINDOW_FLOOR_MESSAGES="5")
    clock = Clock()
    older_question = turn(clock, "user", text("an older question"))
    long_exchange = [turn(clock, "user", text("run every check"))]
    long_exchange += [turn(clock, "assistant", text(f"check {n}")) for n in range(8)]
    newest = [turn(clock, "user", text("and?")), turn(clock, "assistant", text("all done"))]
    history = [older_question, *long_exchange, *newest]
    # The floor's edge (5th newest) is an answer; its question is 10 back, past
    # the cap, so the floor keeps only the newest exchange, and nothing older.
    window = window_of(history, limits)
    assert ids(window.turns) == ids(newest)
