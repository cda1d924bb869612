import math
import random
import re
from collections import Counter
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.recall import (
    MAX_LIMIT,
    rank,
    rank_counts,
    searchable_texts,
    term_counts,
    terms,
)
from memory_core.turns import Turn
from tests.unit.conversation_builders import Clock, text, tool_result, tool_use, turn


def conversation(*bodies: str) -> list[Turn]:
    clock = Clock()
    return [
        turn(clock, "user" if n % 2 == 0 else "assistant", text(b)) for n, b in enumerate(bodies)
    ]


def found(query: str, turns: list[Turn], limit: int = MAX_LIMIT) -> list[str]:
    return [scored.turn.id for scored in rank(query, turns, limit)]


# --- Vocabularies whose words share no term: a word's terms are in no other word ---------


def _latin() -> list[str]:
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    return [
        c1 + v1 + c2 + v2 for c1 in consonants[:8] for v1 in vowels for c2 in "lnr" for v2 in "ao"
    ]


def _from_letters(letters: str, size: int, count: int) -> list[str]:
    """`count` distinct words of `size` letters drawn in order from `letters`."""
    words: list[str] = []
    for n in range(count):
        word = "".join(
            letters[(n * 7 + k * 3 + n // len(letters)) % len(letters)] for k in range(size)
        )
        if word not in words:
            words.append(word)
    return words


def _paired(first: int, count: int, size: int) -> list[str]:
    """Words of `size` characters from consecutive code points: no character in two words."""
    return ["".join(chr(first + n * size + k) for k in range(size)) for n in range(count)]


CYRILLIC = "абвгдежзиклмнопрстуфхцчшщыэюя"  # no й or ё: they fold to и and е
GREEK = "αβγδεζηθικλμνξοπρστυφχψω"  # no ς: it folds to σ
ARABIC = "".join(chr(c) for c in range(0x0628, 0x063B))
VOCABULARIES = {
    "latin": _latin(),
    "cyrillic": _from_letters(CYRILLIC, 5, 40),
    "greek": _from_letters(GREEK, 5, 40),
    "arabic": _from_letters(ARABIC, 4, 40),
    "devanagari": [c + "\u093f" + d + "\u094d" for c in "कखगघ" for d in "तथदधन"],  # with marks
    "han": _paired(0x4E00, 40, 2),
    "katakana": _paired(0x30A2, 20, 2),
    "hangul": _paired(0xAC00, 40, 3),
    "thai": _paired(0x0E01, 15, 3),
}


def test_the_vocabularies_share_no_term():
    every = [word for words in VOCABULARIES.values() for word in words]
    assert len(every) == len(set(every))
    seen: dict[str, str] = {}
    for word in every:
        for term in terms(word):
            assert seen.setdefault(term, word) == word, (term, word, seen[term])


def fullwidth(word: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() else c for c in word)


TYPED = (str.upper, fullwidth, lambda word: word[0].upper() + word[1:], lambda word: word)


@st.composite
def conversations(draw: Any) -> tuple[list[Turn], int, str]:
    """A conversation, the index of one of its turns, and a query of words found in it alone."""
    scripts = draw(st.lists(st.sampled_from(sorted(VOCABULARIES)), min_size=1, max_size=4))
    vocabulary = sorted({word for script in scripts for word in VOCABULARIES[script]})
    words = st.sampled_from(vocabulary)
    bodies = draw(st.lists(st.lists(words, min_size=1, max_size=60), min_size=2, max_size=25))
    target = draw(st.integers(0, len(bodies) - 1))
    elsewhere = {word for n, body in enumerate(bodies) if n != target for word in body}
    rare = sorted(set(bodies[target]) - elsewhere)
    if not rare:
        # A word no other turn has, so that the target always has one ("q" is in no vocabulary).
        unused = sorted(set(vocabulary) - elsewhere) or ["qorvex"]
        rare = [draw(st.sampled_from(unused))]
        bodies[target] = [*bodies[target], rare[0]]
    chosen = draw(st.lists(st.sampled_from(rare), min_size=1, max_size=3, unique=True))
    query = " ".join(draw(st.sampled_from(TYPED))(word) for word in chosen)
    clock = Clock()
    turns = []
    for n, body in enumerate(bodies):
        kind = draw(st.sampled_from(["text", "text", "tool input", "tool result"]))
        said = " ".join(body)
        if kind == "tool input":
            turns.append(turn(clock, "assistant", text("One moment."), tool_use(f"c{n}", q=said)))
        elif kind == "tool result":
            turns.append(turn(clock, "user", tool_result(f"c{n}", said)))
        else:
            turns.append(turn(clock, "user" if n % 2 == 0 else "assistant", text(said)))
    return turns, target, query


@settings(max_examples=300)
@given(conversations())
def test_a_query_of_a_turns_rare_words_finds_that_turn_first(case):
    turns, target, query = case
    best = rank(query, turns, MAX_LIMIT)
    # No other turn holds any of the query's terms: it is the one answer.
    assert [scored.turn.id for scored in best] == [turns[target].id]
    assert best[0].score > 0


# --- Scripts, case, accents -------------------------------------------------------------


CHINESE = "本合同第七条规定了赔偿责任的上限为一千万元。"
JAPANESE = "契約書の第七条を確認してください。"
KOREAN = "계약서를 내일까지 보내 주세요."
THAI = "กรุณาส่งสัญญาเช่าภายในวันพรุ่งนี้"


@pytest.mark.parametrize(
    ("query", "wanted"),
    [
        ("赔偿责任", CHINESE),
        ("上限", CHINESE),
        ("第七条规定", CHINESE),
        ("確認", JAPANESE),
        ("契約書", JAPANESE),
        ("確認して", JAPANESE),
        ("계약서", KOREAN),  # the stem of 계약서를, the contract with its particle
        ("สัญญาเช่า", THAI),
    ],
)
def test_scripts_without_spaces_are_found_by_a_few_of_their_characters(query, wanted):
    turns = conversation(CHINESE, JAPANESE, KOREAN, THAI, "An English turn about clause seven.")
    best = rank(query, turns, MAX_LIMIT)
    assert best[0].turn.content[0]["text"] == wanted
    assert all(scored.score > 0 for scored in best)


def test_a_cjk_query_finds_nothing_where_its_characters_never_stand_together():
    turns = conversation(CHINESE, JAPANESE)
    assert found("责赔", turns) == []


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("ДОГОВОР", "Договор аренды подписан вчера."),
        ("договор", "ДОГОВОР АРЕНДЫ ПОДПИСАН."),
        ("ёлка", "Новая елка стоит."),  # ё and е are one letter to a search
        ("ΣΥΜΒΑΣΗ", "Η σύμβαση υπογράφηκε χθες."),  # capitals without their accent
        ("σύμβασης", "ΤΗΣ ΣΥΜΒΑΣΗΣ"),  # final sigma
        ("résumé", "Send me the resume."),
        ("RESUME", "Le résumé du contrat est joint."),
        ("Ｃｌａｕｓｅ", "See clause 9."),
        ("clause", "ＣＬＡＵＳＥ　９"),
        ("straße", "Die Strasse ist gesperrt."),
        ("ﬁnal", "The final offer."),
        ("हिन्दी", "यह हिन्दी में है"),
        ("عقد", "هذا عَقْد جديد"),  # Arabic vowel marks are optional
    ],
)
def test_case_width_and_accents_do_not_matter(query, body):
    turns = conversation("Nothing to see here.", body, "Nor here.")
    assert found(query, turns) == [turns[1].id]


def test_a_word_with_marks_is_one_term_not_split_at_its_vowel_signs():
    assert terms("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert found("हि", conversation("हिन्दी")) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("2031", ["2031"]),
        ("INV-2031", ["inv", "2031", "inv-2031"]),
        ("7.2", ["7", "2", "7.2"]),
        ("clause-7", ["clause", "7", "clause-7"]),
        ("payment_id", ["payment", "id", "payment_id"]),
        ("https://example.com/a-b.", ["https", "example", "com", "a", "b", "example.com/a-b"]),
        ("e.g. 3", ["e", "g", "3", "e.g"]),
    ],
)
def test_identifiers_are_terms_whole_and_by_their_parts(query, expected):
    assert sorted(terms(query)) == sorted(expected)


def test_an_identifier_is_found_by_a_part_and_ranks_first_when_whole():
    turns = conversation(
        "Invoice INV-2031 is overdue.",
        "Clause 7 of annex 2 covers it.",
        "Per clause 7.2, the cap applies.",
        "Nothing about that.",
    )
    assert found("2031", turns) == [turns[0].id]
    assert found("inv", turns) == [turns[0].id]
    # Both hold a 7 and a 2; only one holds 7.2.
    assert found("7.2", turns) == [turns[2].id, turns[1].id]


# --- Tool blocks ------------------------------------------------------------------------


def test_tool_names_inputs_and_results_are_searched():
    clock = Clock()
    turns = [
        turn(clock, "user", text("Can you check my order?")),
        turn(clock, "assistant", tool_use("c1", "lookup_order", order="ORD-88412", note="urgent")),
        turn(clock, "user", tool_result("c1", "Order ORD-88412 shipped via Kuehne.")),
        turn(
            clock,
            "user",
            {
                "toolResult": {
                    "toolUseId": "c2",
                    "content": [{"json": {"carrier": "Dachser", "eta": 3}}],
                }
            },
        ),
        turn(clock, "assistant", text("It shipped.")),
    ]
    assert found("urgent", turns) == [turns[1].id]
    assert found("lookup_order", turns)[0] == turns[1].id
    assert found("kuehne", turns) == [turns[2].id]
    assert found("dachser", turns) == [turns[3].id]
    assert sorted(found("ORD-88412", turns)) == sorted([turns[1].id, turns[2].id])
    # Keys are not what was said: `carrier` and `order` name fields.
    assert found("carrier", turns) == []
    assert searchable_texts(turns[3]) == ["Dachser", "3"]


# --- Edges ------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "?!…", "— ·"])
def test_a_query_without_terms_finds_nothing(query):
    assert rank(query, conversation("Hello there", "What? — ·"), 5) == []


def test_no_match_and_no_turns_find_nothing():
    assert rank("zeppelin", conversation("Hello there", "General Kenobi"), 5) == []
    assert rank("zeppelin", [], 5) == []


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1])
def test_a_limit_out_of_range_is_a_callers_bug(limit):
    with pytest.raises(ValueError, match="1 to 20"):
        rank("hello", conversation("hello"), limit)


def test_equal_scores_come_newest_first_and_the_limit_holds():
    turns = conversation(*(["the same words"] * 6), "other words")
    best = rank("same", turns, 4)
    assert [scored.turn.id for scored in best] == [t.id for t in reversed(turns[:6])][:4]
    assert len({scored.score for scored in best}) == 1


def test_an_earlier_turn_can_outrank_a_newer_one():
    # Four times in six words against once in two: idf alike, length weighs less than count.
    turns = conversation("cap cap cap cap the end", "the cap")
    assert found("cap", turns) == [turns[0].id, turns[1].id]


words = st.sampled_from(
    [
        "cap",
        "clause",
        "seven",
        "indemnity",
        "the",
        "of",
        "and",
        "notice",
        "term",
        "fee",
        "7.2",
        "é",
        "ß",
    ]
)


@settings(max_examples=200)
@given(
    st.lists(st.lists(words, max_size=30), min_size=1, max_size=30),
    st.lists(words, min_size=1, max_size=4),
    st.integers(1, MAX_LIMIT),
)
def test_scores_are_positive_and_never_increase_and_the_limit_holds(bodies, query_words, limit):
    turns = conversation(*(" ".join(body) for body in bodies))
    best = rank(" ".join(query_words), turns, limit)
    assert len(best) <= limit
    scores = [scored.score for scored in best]
    assert all(score > 0 for score in scores)
    assert scores == sorted(scores, reverse=True)
    for better, worse in pairwise(best):
        if better.score == worse.score:
            assert better.turn.position > worse.turn.position
    # Every turn holding a query term is a candidate: the best are as many as allowed.
    matching = [
        t for t in turns if set(terms(" ".join(query_words))) & set(terms(t.content[0]["text"]))
    ]
    assert len(best) == min(limit, len(matching))


# --- BM25 -------------------------------------------------------------------------------


def test_bm25_on_a_tiny_corpus_computed_by_hand():
    # Lengths 3, 2 and 4 terms: 3 on average. k1 = 1.2, b = 0.75.
    turns = conversation("apple banana apple", "banana cherry", "cherry date elder fig")
    idf_1_of_3 = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # ln(8/3)
    idf_2_of_3 = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # ln(1.6)
    # apple: twice in a document of average length; norm = 1.2 * (0.25 + 0.75 * 3 / 3) = 1.2.
    [apple] = rank("apple", turns, 5)
    assert apple.turn is turns[0]
    assert apple.score == pytest.approx(idf_1_of_3 * 2 * 2.2 / (2 + 1.2), abs=1e-9)
    assert apple.score == pytest.approx(math.log(8 / 3) * 1.375, abs=1e-9)
    # banana and cherry: once each in the short one (norm 0.9); banana alone in the first
    # (norm 1.2); cherry alone in the long one (norm 1.2 * (0.25 + 0.75 * 4 / 3) = 1.5).
    best = rank("banana cherry", turns, 5)
    assert [scored.turn for scored in best] == [turns[1], turns[0], turns[2]]
    expected = [
        2 * idf_2_of_3 * 2.2 / (1 + 0.9),
        idf_2_of_3 * 2.2 / (1 + 1.2),
        idf_2_of_3 * 2.2 / (1 + 1.5),
    ]
    for scored, score in zip(best, expected, strict=True):
        assert scored.score == pytest.approx(score, abs=1e-9)


def test_a_repeated_query_word_weighs_no_more():
    turns = conversation("apple banana apple", "banana cherry", "cherry date elder fig")
    assert rank("banana banana BANANA cherry", turns, 5) == rank("banana cherry", turns, 5)


def test_a_rarer_term_weighs_more():
    turns = conversation("alpha beta", "alpha gamma", "alpha delta", "epsilon beta")
    # beta is in two turns, alpha in three: the turn with both, then beta's other turn.
    assert found("alpha beta", turns)[:2] == [turns[0].id, turns[3].id]


# --- Counted beforehand: the same ranking -----------------------------------------------

text_pieces = st.sampled_from(
    [
        "clause",
        "Clause",
        "7.2",
        "INV-2031",
        "x_y",
        "résumé",
        "Straße",
        "ﬁnal",
        "договор",
        "σύμβαση",
        "契約書を確認",
        "中",
        "계약서를",
        "สัญญา",
        "हिन्दी",
        "عقد",
        "’",
        "—",
        "✅",
        " ",
        "\n",
        ".",
        "-",
        "_",
        "/",
        ":",
        "@",
        "a",
        "7",
        "e.g.",
        "the",
        "\u0301",
        "\u00ad",
        "\u094d",
        "\x00",
        "\u0e31",
        "\u3099",
        "ｶﾞ",
    ]
)
bodies_strategy = st.lists(st.lists(text_pieces, max_size=40).map("".join), min_size=1, max_size=20)
query_strategy = st.lists(text_pieces, min_size=1, max_size=6).map("".join)


@settings(max_examples=300)
@given(bodies_strategy, query_strategy, st.integers(1, MAX_LIMIT))
def test_ranking_from_stored_counts_is_the_same_ranking(bodies, query, limit):
    turns = conversation(*bodies)
    direct = rank(query, turns, limit)
    stored = rank_counts(query, [(t, term_counts(t)) for t in turns], limit)
    assert direct == stored


@given(bodies_strategy)
def test_term_counts_are_the_terms_counted(bodies):
    for t in conversation(*bodies):
        counted = term_counts(t)
        every = terms("\n".join(searchable_texts(t)))
        assert counted.counts == dict(Counter(every))
        # A compound (the only term with a joiner) repeats words: the length leaves it out.
        compounds = [term for term in every if re.search(r"[-._/:@\u2010]", term)]
        assert counted.length == len(every) - len(compounds)


def test_common_words_counted_turn_by_turn_rank_as_from_stored_counts():
    # Thousands of occurrences: past the first few, a word is counted turn by turn instead.
    rng = random.Random(7)
    vocabulary = ["cap", "the", "clause", "7.2", "notice", "résumé", "—", "契約"]
    weights = [4, 4, 1, 1, 1, 0.3, 0.3, 0.01]  # most turns fold to ASCII
    bodies = [" ".join(rng.choices(vocabulary, weights, k=rng.randint(0, 40))) for _ in range(800)]
    turns = conversation(*bodies)
    counted = [(t, term_counts(t)) for t in turns]
    assert min(sum(body.split().count(word) for body in bodies) for word in ("the", "cap")) > 4000
    for query in ["the", "the cap", "Clause 7.2", "resume", "契約", "notice — cap 7"]:
        assert rank(query, turns, MAX_LIMIT) == rank_counts(query, counted, MAX_LIMIT), query


def test_the_letters_a_search_rejects_in_the_regex_are_all_letters_of_words():
    # A place next to one of them is no occurrence: only then may the regex skip it.
    from memory_core import recall  # noqa: PLC0415  (private: the invariant behind `_search`)

    inner = recall._patterns().inner
    surely = re.compile(recall._SURELY_INNER)
    assert all(inner.fullmatch(c) for c in map(chr, range(0x3000)) if surely.fullmatch(c))
