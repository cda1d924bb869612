"""Recall: a contact's older turns found by their words, best first, each cut around its match.

The window holds the newest turns; the memory holds only the gist of the
rest. Counsel sometimes needs the exact words: a clause pasted weeks ago, an
invoice number. Recall ranks the contact's retained turns (within
`historyDays`) against a query and returns the best, a long one cut around
the words that matched.

Terms. A text is NFKC-normalised and casefolded, and the accents of Latin,
Greek and Cyrillic letters and the optional vowel points of Hebrew and Arabic
are dropped: `Ｃｌａｕｓｅ` is `clause`; `RÉSUMÉ`, `résumé` and `resume` are one
term, as are `ё` and `е`, for a query is typed with accents or without.
A run of letters, digits and the marks inside words (Devanagari's vowel
signs) is a word; anything else separates. Words joined by `. - _ / : @`
also make a compound: `INV-2031` gives `inv`, `2031` and `inv-2031`, `7.2`
gives `7`, `2` and `7.2`, so a query `7.2` finds a 7 and a 2 anywhere but
ranks an exact 7.2 first. Scripts written without spaces between words
(Han, kana, Thai, Lao, Myanmar, Khmer) give each pair of neighbouring
characters instead (a character standing alone, itself): no dictionary is
needed, and any two characters of a sentence are found. Hangul is paired
too, for a Korean word carries its particles (계약서를: the contract, as an
object) and is found by its stem. A single such character in a query finds
only that character standing alone.

Ranking. Okapi BM25 with the turns as documents: k1 1.2, b 0.75, idf
ln(1 + (N - df + 0.5) / (df + 0.5)), always positive. A document's length is
its words and pairs; a compound repeats words already counted and adds
nothing. A query is a set of terms: a word typed twice weighs no more. Only
turns matching some term are returned, best first, equal scores newest first,
1 to 20 of them (the route refuses another limit; here it is a ValueError).
`rank` reads the turns as they are; `rank_counts` gives the same scores from
each turn's terms counted beforehand (`term_counts`), should an index keep them.

Passages. A turn within the budget comes back whole. A longer one keeps the
stretch of its text (texts, tool inputs as compact JSON, tool results'
contents, in order, as the trim reads them) with the most query terms, then
the most hits, in as much context as the budget allows on both sides, cut
at a line break or a space where one is near, a line `… N tokens omitted …`
where text was cut. A turn where no term matches keeps its head and tail, as
the window's trim cuts it. Either way the passage's estimate is within the
budget, markers included, unless the blocks' structure alone (ids, names, a
marker each) is over it.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache, lru_cache
from itertools import repeat
from typing import Any

from memory_core.tokens import (
    UNITS_PER_TOKEN,
    compact_json,
    content_units,
    estimate_tokens,
    estimate_turn_tokens,
    text_units,
    tokens_to_units,
    units_to_tokens,
)
from memory_core.trim import (
    TrimShape,
    longest_within,
    omission_marker,
    recut,
    trim_turn,
    trimmable_texts,
)
from memory_core.turns import Turn, TurnPosition

K1 = 1.2
B = 0.75
MAX_LIMIT = 20
"""The most passages one recall returns."""

# --- Terms ------------------------------------------------------------------------------

_PAIRED = (
    # Scripts written without spaces between words: their terms are pairs of characters.
    "\u0e01-\u0e3a\u0e40-\u0e4e\u0e50-\u0e59"  # Thai letters, marks and digits
    "\u0e81-\u0edf"  # Lao
    "\u1000-\u1049\u1050-\u109f"  # Myanmar, its punctuation left out
    "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff"  # Hangul
    "\u1780-\u17d3\u17e0-\u17e9"  # Khmer
    "\u3005-\u3007\u3021-\u3029\u303b"  # ideographic iteration marks and numerals
    "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"  # Han
)
_MARK_BLOCKS = (
    (0x0300, 0x1E00),
    (0x20D0, 0x2100),
    (0x2CEF, 0x2E00),
    (0x302A, 0x3030),
    (0xA66F, 0xAC00),
    (0xFB1E, 0xFB1F),
    (0xFE20, 0xFE30),
)
"""The blocks of the BMP that hold the combining marks of living scripts."""
_JOINERS = "[\\-._/:@\u2010]"
_DOCUMENT_BREAK = "\x00"
"""Between the documents of a corpus read at once: a separator, and in no text."""
_DROPPED = re.compile(
    # Latin, Greek and Cyrillic accents (as NFKD leaves them); Hebrew points and
    # cantillation; Arabic harakat, superscript alef and tatweel; and the invisible
    # characters that sit inside words (soft hyphen, zero-width joiners).
    "[\u0300-\u036f\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"
    "\u0640\u064b-\u065f\u0670\u00ad\u200b-\u200d\u2060\ufeff]+"
)


def _word_and_compound(inner: str) -> tuple[str, str]:
    word = f"{inner}++"
    # A compound starts where no word, nor a word and a joiner, comes before it: so it is
    # read the same in a whole text as where it is searched for (`_is_occurrence`).
    compound = f"{inner}(?<!{inner}.)(?<!{inner}{_JOINERS}.){inner}*+(?:{_JOINERS}{word})+"
    return word, compound


# On ASCII text, the common case, a word's characters are a plain class.
_ASCII_WORDS, _ASCII_COMPOUNDS = (re.compile(p) for p in _word_and_compound("[a-z0-9]"))
_JOINER = re.compile(_JOINERS)
_SURELY_INNER = "[a-z0-9\u00e0-\u00f6\u00f8-\u00ff\u0100-\u024f\u03b1-\u03c9\u0430-\u045f]"
"""Letters a word may hold, few enough to compile in no time: Latin, Greek, Cyrillic."""
_MAY_JOIN = re.compile(f"\\S{_JOINERS}\\S")
"""Where a compound may be: a joiner between two characters that are not spaces."""


@dataclass(frozen=True, slots=True)
class _Patterns:
    """The patterns that name the paired scripts or the marks, compiled on first use.

    Python's regex compiler walks each range of a class code point by code
    point, Han's and Hangul's 40,000 included: some 50 ms in all, which a cold
    start that never recalls anything should not pay.
    """

    paired: re.Pattern[str]
    """One character of a paired script."""
    inner: re.Pattern[str]
    """One character of a word: a letter, a digit or a mark, not of a paired script."""
    separating: re.Pattern[str]
    """A character beyond ASCII that is in no term (’ “ – € ✅): a space, one for one, so a
    text of English words and typographic marks folds to ASCII."""
    words: re.Pattern[str]
    compounds: re.Pattern[str]
    pairs: re.Pattern[str]
    """A pair at each character of a run but its last; a character alone, itself."""
    words_or_breaks: re.Pattern[str]
    runs_or_breaks: re.Pattern[str]


@cache
def _patterns() -> _Patterns:
    paired = re.compile(f"[{_PAIRED}]")
    # Python's `\w` is letters, digits and `_` but no marks: it would split हिन्दी at
    # its vowel signs. The marks are read from `unicodedata` (about a millisecond).
    marks = _class_body(
        [
            code
            for low, high in _MARK_BLOCKS
            for code in range(low, high)
            if unicodedata.category(chr(code)).startswith("M") and not paired.match(chr(code))
        ]
    )
    inner = f"(?:[^\\W_{_PAIRED}]|[{marks}])"
    word, compound = _word_and_compound(inner)
    lone = f"(?<![{_PAIRED}])[{_PAIRED}](?![{_PAIRED}])"
    return _Patterns(
        paired=paired,
        inner=re.compile(inner),
        separating=re.compile(f"[^\\x00-\\x7f\\w{marks}{_PAIRED}]"),
        words=re.compile(word),
        compounds=re.compile(compound),
        pairs=re.compile(f"(?=([{_PAIRED}]{{2}}|{lone}))"),
        words_or_breaks=re.compile(f"{word}|{_DOCUMENT_BREAK}"),
        runs_or_breaks=re.compile(f"[{_PAIRED}]+|{_DOCUMENT_BREAK}"),
    )


def _class_body(codes: Sequence[int]) -> str:
    """These code points as a regex character class's ranges."""
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in ranges)


def _fold(text: str) -> str:
    """The text as terms are read from it: NFKC, casefolded, accents and vowel points dropped.

    Its length is the text's unless a character folds to several (ß, ﬁ) or is dropped.
    """
    if text.isascii():
        return text.lower()
    decomposed = _DROPPED.sub("", unicodedata.normalize("NFKD", text).casefold())
    # Composed again: Hangul syllables, and kana with their voicing marks, are whole once more.
    return _patterns().separating.sub(" ", unicodedata.normalize("NFKC", decomposed))


def terms(text: str) -> list[str]:
    """A text's terms, as a bag: its words, then its compounds, then its pairs."""
    words, compounds, pairs = _terms_by_kind(_fold(text))
    return words + compounds + pairs


def _terms_by_kind(folded: str) -> tuple[list[str], list[str], list[str]]:
    # A compound or a pair is looked for only in a text that may hold one: a pattern that
    # fails at every character is still tried at every character.
    joined = _MAY_JOIN.search(folded)
    if folded.isascii():
        return _ASCII_WORDS.findall(folded), _ASCII_COMPOUNDS.findall(folded) if joined else [], []
    patterns = _patterns()
    return (
        patterns.words.findall(folded),
        patterns.compounds.findall(folded) if joined else [],
        patterns.pairs.findall(folded) if patterns.paired.search(folded) else [],
    )


class _Kind(Enum):
    WORD = "word"
    COMPOUND = "compound"
    PAIR = "pair"
    LONE = "a paired character alone"


@lru_cache(maxsize=1024)
def _search(term: str) -> tuple[re.Pattern[str], _Kind]:
    """A pattern finding where a term may be, and its kind, which says where it is.

    The pattern is the term itself, which the regex engine skips to, and no class
    of a paired script's or of the marks: it compiles in a fraction of a
    millisecond. `_is_occurrence` then looks at the characters either side.
    """
    if _patterns().paired.match(term):
        if len(term) == 1:
            return re.compile(re.escape(term)), _Kind.LONE
        # Pairs overlap: the first character, where the second follows.
        return re.compile(f"{re.escape(term[0])}(?={re.escape(term[1])})"), _Kind.PAIR
    kind = _Kind.COMPOUND if _JOINER.search(term) else _Kind.WORD
    # Where the regex engine can tell cheaply that the term runs on into a longer word,
    # it moves on: most places a short word is found at are inside other words.
    ends = f"(?<!{_SURELY_INNER}.{{{len(term)}}})(?!{_SURELY_INNER})"
    return re.compile(re.escape(term) + ends), kind


def _is_occurrence(folded: str, start: int, end: int, kind: _Kind) -> bool:
    """Whether `terms` reads the term found at folded[start:end] there."""
    patterns = _patterns()
    if kind is _Kind.PAIR:
        return True
    if kind is _Kind.LONE:
        paired = patterns.paired
        return not (start and paired.match(folded, start - 1)) and not paired.match(folded, end)
    inner = patterns.inner
    if (start and inner.match(folded, start - 1)) or inner.match(folded, end):
        return False  # inside a longer word
    if kind is _Kind.COMPOUND:
        after = _JOINER.match(folded, end) and inner.match(folded, end + 1)
        before = start > 1 and _JOINER.match(folded, start - 1) and inner.match(folded, start - 2)
        return not (after or before)  # inside a longer compound
    return True


def _occurrences(term: str, folded: str) -> Iterator[int]:
    """Where the term starts in a folded text: exactly where `terms` reads it."""
    search, kind = _search(term)
    for match in search.finditer(folded):
        if _is_occurrence(folded, match.start(), match.start() + len(term), kind):
            yield match.start()


def searchable_texts(turn: Turn) -> list[str]:
    """What recall searches in a turn, in order: its texts, its tools' names, inputs, results.

    A tool input or a JSON result is searched by its values (strings and
    numbers), not its keys: the keys name fields, the values are what was said.
    """
    texts: list[str] = []
    for block in turn.content:
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            tool_use = block["toolUse"]
            texts.append(tool_use.get("name", ""))
            texts.extend(_json_values(tool_use.get("input", {})))
        elif "toolResult" in block:
            for item in block["toolResult"].get("content", ()):
                if "text" in item:
                    texts.append(item["text"])
                elif "json" in item:
                    texts.extend(_json_values(item["json"]))
    return texts


def _json_values(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return  # true, false and null say nothing to search for
    elif isinstance(value, int | float):
        yield compact_json(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _json_values(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _json_values(item)


def _document(turn: Turn) -> str:
    # A line break between texts: no term runs from one into the next.
    return "\n".join(searchable_texts(turn))


# --- Ranking ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scored:
    turn: Turn
    score: float


@dataclass(frozen=True, slots=True)
class TermCounts:
    """What BM25 reads of a turn, small enough to keep beside it."""

    counts: dict[str, int]
    """Each term's occurrences, compounds and pairs included."""
    length: int
    """Its words and pairs: BM25's document length."""


def term_counts(turn: Turn) -> TermCounts:
    words, compounds, pairs = _terms_by_kind(_fold(_document(turn)))
    return TermCounts(dict(Counter(words + compounds + pairs)), len(words) + len(pairs))


def rank(query: str, turns: Sequence[Turn], limit: int) -> list[Scored]:
    """The turns that match the query, best first by BM25, at most `limit` of them.

    The turns are folded and read as one text, each pass over it in C where
    it can be: a query term is looked for by its own pattern, or counted turn
    by turn where it is common; the other terms are only counted.
    """
    _check(limit)
    wanted = set(terms(query))
    if not wanted or not turns:
        return []
    lengths, frequencies = _Corpus([_document(turn) for turn in turns]).counts(wanted)
    return _best(turns, lengths, frequencies, limit)


def rank_counts(
    query: str, documents: Sequence[tuple[Turn, TermCounts]], limit: int
) -> list[Scored]:
    """`rank`, from each turn's terms counted beforehand (`term_counts`): the same scores."""
    _check(limit)
    wanted = set(terms(query))
    if not wanted or not documents:
        return []
    frequencies: dict[str, dict[int, int]] = {term: {} for term in wanted}
    for index, (_, counted) in enumerate(documents):
        for term, found in frequencies.items():
            count = counted.counts.get(term)
            if count:
                found[index] = count
    lengths = [counted.length for _, counted in documents]
    return _best([turn for turn, _ in documents], lengths, frequencies, limit)


def _check(limit: int) -> None:
    # The route refuses any other limit: here one is a caller's bug, not a request's.
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"a recall returns 1 to {MAX_LIMIT} passages, not {limit}")


_ASCII_WORD_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789"
# Each ASCII letter or digit an `a`, anything else a space: a word starts at each " a".
_WORD_STARTS = str.maketrans(
    {chr(code): "a" if chr(code) in _ASCII_WORD_CHARACTERS else " " for code in range(1, 128)}
)
# Anything but a letter or a digit a space: with spaces doubled, a word `w` is each " w ".
_SPACED = str.maketrans(
    {chr(code): " " for code in range(1, 128) if chr(code) not in _ASCII_WORD_CHARACTERS}
)


_SEARCHED_AT_MOST = 2000
"""Occurrences of an ASCII word found one by one before it is counted document by document."""


class _Corpus:
    """Documents folded and read at once: their lengths, and where the wanted terms are.

    A document that folds to ASCII (English, most French or German) is read by
    `str.translate` and `str.count`, in C, bar its rare terms, each searched
    for by its pattern; any other, by the regexes.
    """

    def __init__(self, documents: Sequence[str]) -> None:
        self.size = len(documents)
        if sum(document.count(_DOCUMENT_BREAK) for document in documents):
            documents = [document.replace(_DOCUMENT_BREAK, " ") for document in documents]
        self.ascii = [index for index, document in enumerate(documents) if document.isascii()]
        # An ASCII document folds to its lower case: all of them at once.
        ascii_texts = (
            [f" {_DOCUMENT_BREAK} ".join(documents[i] for i in self.ascii).lower()]
            if self.ascii
            else []
        )
        others = [index for index, document in enumerate(documents) if not document.isascii()]
        folded = _fold(_DOCUMENT_BREAK.join(documents[i] for i in others)).split(_DOCUMENT_BREAK)
        self.other: list[int] = []
        other_texts: list[str] = []
        for index, text in zip(others, folded if others else [], strict=True):
            # Many fold to ASCII: their accents dropped, their typographic marks spaces.
            if text.isascii():
                self.ascii.append(index)
                ascii_texts.append(text)
            else:
                self.other.append(index)
                other_texts.append(text)
        # Each document between spaces: its first and last words read " w " too.
        self.ascii_text = f" {f' {_DOCUMENT_BREAK} '.join(ascii_texts)} "
        self.other_text = _DOCUMENT_BREAK.join(other_texts)

    def counts(self, wanted: set[str]) -> tuple[list[int], dict[str, dict[int, int]]]:
        lengths = [0] * self.size
        frequencies: dict[str, dict[int, int]] = {term: {} for term in wanted}
        if self.ascii:
            self._count_ascii(wanted, lengths, frequencies)
        if self.other:
            for index, length in zip(self.other, _lengths(self.other_text), strict=True):
                lengths[index] = length
            breaks = _breaks(self.other_text)
            for term in wanted:
                frequencies[term].update(
                    _found(self.other_text, breaks, self.other, term, None) or {}
                )
        return lengths, frequencies

    def _count_ascii(
        self, wanted: set[str], lengths: list[int], frequencies: dict[str, dict[int, int]]
    ) -> None:
        starts = self.ascii_text.translate(_WORD_STARTS).split(_DOCUMENT_BREAK)
        for index, words in zip(self.ascii, map(str.count, starts, repeat(" a")), strict=True):
            lengths[index] = words
        breaks = _breaks(self.ascii_text)
        spaced: list[str] | None = None
        for term in sorted(term for term in wanted if term.isascii()):
            # A word is searched for while it is rare; past that, counted in each document.
            # A compound, whose joiners are spaces in `spaced`, is always searched for.
            at_most = _SEARCHED_AT_MOST if term.isalnum() else None
            found = _found(self.ascii_text, breaks, self.ascii, term, at_most)
            if found is None:
                if spaced is None:
                    doubled = self.ascii_text.translate(_SPACED).replace(" ", "  ")
                    spaced = doubled.split(_DOCUMENT_BREAK)
                counted = map(str.count, spaced, repeat(f" {term} "))
                found = {i: n for i, n in zip(self.ascii, counted, strict=True) if n}
            frequencies[term].update(found)


def _found(
    text: str, breaks: Sequence[int], indices: Sequence[int], term: str, at_most: int | None
) -> dict[int, int] | None:
    """A term's count in each document of a folded corpus it occurs in, by the document's
    index among all (`indices`); None past `at_most` places where it may be.

    The term's pattern skips from one place to the next; each is placed by bisection.
    """
    search, kind = _search(term)
    counts: dict[int, int] = {}
    for seen, match in enumerate(search.finditer(text)):
        if seen == at_most:
            return None
        start = match.start()
        if _is_occurrence(text, start, start + len(term), kind):
            index = indices[bisect_right(breaks, start)]
            counts[index] = counts.get(index, 0) + 1
    return counts


def _lengths(text: str) -> list[int]:
    """Each document's words and pairs, in a folded corpus of documents beyond ASCII."""
    patterns = _patterns()
    lengths = [len(found) for found in _split(patterns.words_or_breaks.findall(text))]
    # A run of n characters is n - 1 pairs, a character alone one: counted per run.
    for index, runs in enumerate(_split(patterns.runs_or_breaks.findall(text))):
        sizes = list(map(len, runs))
        lengths[index] += sum(sizes) - len(sizes) + sizes.count(1)
    return lengths


def _split(found: list[str]) -> Iterator[list[str]]:
    """The terms read from a corpus, document by document."""
    start = 0
    try:
        while True:
            end = found.index(_DOCUMENT_BREAK, start)
            yield found[start:end]
            start = end + 1
    except ValueError:
        yield found[start:]


def _breaks(text: str) -> list[int]:
    positions: list[int] = []
    at = text.find(_DOCUMENT_BREAK)
    while at != -1:
        positions.append(at)
        at = text.find(_DOCUMENT_BREAK, at + 1)
    return positions


def _best(
    turns: Sequence[Turn],
    lengths: Sequence[int],
    frequencies: Mapping[str, Mapping[int, int]],
    limit: int,
) -> list[Scored]:
    positions = [turn.position for turn in turns]
    return [Scored(turns[i], score) for i, score in best(positions, lengths, frequencies, limit)]


def best(
    positions: Sequence[TurnPosition],
    lengths: Sequence[int],
    frequencies: Mapping[str, Mapping[int, int]],
    limit: int,
) -> list[tuple[int, float]]:
    """BM25 over the documents, the best `limit` as (index, score): by score, then newest
    first. A document is its position, its length and its count of each query term
    (`frequencies[term][index]`), however they were read.

    The terms are summed in one order, sorted, so that equal documents score
    exactly alike and `rank`, `rank_counts` and an index agree to the last bit.
    """
    documents = len(positions)
    average = sum(lengths) / documents
    if not average:
        return []  # not a term in any of them
    norms = [K1 * (1 - B + B * length / average) for length in lengths]
    scores: dict[int, float] = {}
    for term in sorted(frequencies):
        counts = frequencies[term]
        if not counts:
            continue
        idf = math.log(1 + (documents - len(counts) + 0.5) / (len(counts) + 0.5))
        for index, count in counts.items():
            scores[index] = scores.get(index, 0.0) + idf * count * (K1 + 1) / (count + norms[index])
    if not scores:
        return []
    # Positions are compared only among the best and those tied with the last of them.
    least = heapq.nlargest(limit, scores.values())[-1]
    ranked = sorted(
        ((score, positions[index], index) for index, score in scores.items() if score >= least),
        reverse=True,
    )
    return [(index, score) for score, _, index in ranked[:limit]]


# --- Passages ---------------------------------------------------------------------------

_LINE_BREAK_UNITS = text_units("\n")
_MAX_FITTINGS = 8
"""Cuts tried before the head and tail: the first usually fits, the second nearly always."""


def passage(turn: Turn, query: str, max_tokens: int) -> Turn:
    """The turn as recall returns it: whole within `max_tokens`, else cut around its match,
    or to its head and tail where the query matches none of its cuttable text.

    Its id, role and times are the turn's; only its content may be cut.
    """
    if max_tokens < 1:
        raise ValueError(f"a passage's budget is at least a token, not {max_tokens}")
    if estimate_turn_tokens(turn) <= max_tokens:
        return turn
    texts = trimmable_texts(turn.content)
    hits = _hits(texts, set(terms(query)))
    around = _around(turn, texts, hits, tokens_to_units(max_tokens)) if hits else None
    return around or _head_and_tail(turn, max_tokens)


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int
    end: int
    term: str


def _hits(texts: Sequence[str], wanted: set[str]) -> list[_Hit]:
    """Where the wanted terms are in the texts read as one, a line break between each two."""
    hits: list[_Hit] = []
    offset = 0
    for text in texts:
        hits.extend(
            _Hit(offset + start, offset + end, term) for start, end, term in _spans(text, wanted)
        )
        offset += len(text) + 1
    hits.sort(key=lambda hit: (hit.start, hit.end))
    return hits


_LINES = re.compile(r"[^\n]+")
_SPACED_WORDS = re.compile(r"\S+")


def _spans(
    text: str,
    wanted: set[str],
    offset: int = 0,
    pieces: tuple[re.Pattern[str], ...] = (_LINES, _SPACED_WORDS),
) -> Iterator[tuple[int, int, str]]:
    """The wanted terms' places in a text (at `offset`), in its own characters.

    Folding keeps every character in place in nearly every text. Where one
    folds to several (ß, ﬁ) or to none, the text is placed line by line, and
    a line that moved word by word; a term in a word that moved stands for it.
    """
    folded = _fold(text)
    if len(folded) == len(text) or not pieces:
        moved = len(folded) != len(text)
        for term in wanted:
            for start in _occurrences(term, folded):
                if moved:
                    yield offset, offset + len(text), term
                else:
                    yield offset + start, offset + start + len(term), term
        return
    for piece in pieces[0].finditer(text):
        yield from _spans(piece.group(), wanted, offset + piece.start(), pieces[1:])


def _around(turn: Turn, texts: Sequence[str], hits: Sequence[_Hit], limit: int) -> Turn | None:
    """The turn cut to the stretch of its text with the densest hits, or None where none fits.

    The stretch is given what the budget leaves after the blocks' structure and
    two markers; the cut is then costed whole (JSON escapes and every marker
    included) and, where it is over, cut again from a smaller budget.
    """
    run = "\n".join(texts)
    # The blocks with every text emptied: their ids, names and keys, which are always kept.
    structure = content_units(recut(turn.content, _Emptied()))
    budget = limit - structure - 2 * _marker_units(estimate_tokens(run))
    for attempt in range(_MAX_FITTINGS):
        window = _densest(run, hits, budget)
        if window is None:
            return None
        content = recut(turn.content, _KeptStretch(_widened(run, window, budget)))
        units = content_units(content)
        if units <= limit:
            return turn.with_content(content)
        # Doubled at each attempt: a cut moved back to the same space is shortened no more
        # by an excess smaller than the word it ends in.
        budget -= max(units - limit, UNITS_PER_TOKEN) << attempt
    return None


def _marker_units(omitted_tokens: int) -> int:
    return text_units(omission_marker(omitted_tokens)) + _LINE_BREAK_UNITS


def _densest(run: str, hits: Sequence[_Hit], budget: int) -> tuple[int, int] | None:
    """The stretch from a hit's start to a hit's end within `budget` units holding the most
    distinct terms, then the most hits (the first such); None if no hit fits alone."""
    if budget <= 0:
        return None
    # What the run costs up to each hit's start and end: each stretch between two costed once.
    places = sorted({place for hit in hits for place in (hit.start, hit.end)})
    cost_at: dict[int, int] = {}
    spent = previous = 0
    for place in places:
        spent += text_units(run[previous:place])
        cost_at[place] = spent
        previous = place
    best: tuple[int, int] | None = None
    best_key = (0, 0)
    inside: Counter[str] = Counter()
    first = 0
    end = 0
    for last, hit in enumerate(hits):
        inside[hit.term] += 1
        end = max(end, hit.end)
        while first <= last and cost_at[end] - cost_at[hits[first].start] > budget:
            inside[hits[first].term] -= 1
            if not inside[hits[first].term]:
                del inside[hits[first].term]
            first += 1
        key = (len(inside), last - first + 1)
        if first <= last and key > best_key:
            best, best_key = (hits[first].start, end), key
    return best


def _widened(run: str, window: tuple[int, int], budget: int) -> tuple[int, int]:
    """The window with context on both sides, as much as the budget allows, half each side
    (what one side cannot use goes to the other), its ends moved to a line break or a space
    where one is in the outer half of the context."""
    start, end = window
    room = budget - text_units(run[start:end])
    before = longest_within(run[:start], room // 2, from_end=True)
    after = longest_within(run[end:], room - text_units(run[start - before : start]))
    if end + after == len(run):
        before = longest_within(
            run[:start], room - text_units(run[end : end + after]), from_end=True
        )
    kept_start, kept_end = start - before, end + after
    if kept_start > 0 and not run[kept_start - 1].isspace():
        edge = _boundary(run, kept_start, kept_start + before // 2 + 1, last=False)
        kept_start = kept_start if edge is None else edge + 1
    if kept_end < len(run) and not run[kept_end].isspace():
        edge = _boundary(run, kept_end - after // 2, kept_end, last=True)
        kept_end = kept_end if edge is None else edge
    return kept_start, kept_end


def _boundary(run: str, low: int, high: int, *, last: bool) -> int | None:
    """A line break in run[low:high], else a space or a tab: the first or the last one."""
    for characters in ("\n", " \t"):
        if last:
            found = max(run.rfind(character, low, high) for character in characters)
        else:
            places = [run.find(character, low, high) for character in characters]
            found = min((place for place in places if place != -1), default=-1)
        if found != -1:
            return found
    return None


class _Emptied:
    """Keeps nothing of any text: what is left is the blocks' structure."""

    def take(self, text: str) -> str:
        return ""


class _KeptStretch:
    """Cuts each text to its part of `kept`, the texts read as one with a line break
    between each two, a marker for each side cut."""

    def __init__(self, kept: tuple[int, int]) -> None:
        self.kept = kept
        self.offset = 0

    def take(self, text: str) -> str:
        kept_start, kept_end = self.kept
        start = min(max(kept_start - self.offset, 0), len(text))
        end = max(min(kept_end - self.offset, len(text)), start)
        self.offset += len(text) + 1
        return _cut_text(text, start, end)


def _cut_text(text: str, start: int, end: int) -> str:
    """text[start:end] with a marker line for each side cut; a side cheaper than its
    marker is kept instead."""
    before, after = text[:start], text[end:]
    head = _marker_for(before)
    tail = _marker_for(after)
    kept = text[0 if head is None else start : len(text) if tail is None else end]
    if head is None and tail is None:
        return text
    return "\n".join(part for part in (head, kept, tail) if part)


def _marker_for(omitted: str) -> str | None:
    """The marker for cutting `omitted`; None where the marker would cost as much."""
    if not omitted:
        return None
    tokens = estimate_tokens(omitted)
    return omission_marker(tokens) if text_units(omitted) > _marker_units(tokens) else None


def _head_and_tail(turn: Turn, max_tokens: int) -> Turn:
    """The turn cut as the window's trim cuts it (`TrimShape.for_budget`), its head and tail
    made shorter, both alike, while the whole is over the budget."""
    limit = tokens_to_units(max_tokens)
    shape = TrimShape.for_budget(max_tokens)
    while True:
        trimmed = trim_turn(turn, shape)
        over = content_units(trimmed.content) - limit
        if over <= 0 or shape.head_tokens + shape.tail_tokens == 0:
            return trimmed
        less = -(-units_to_tokens(over) // 2)
        shape = TrimShape(
            max_tokens, max(0, shape.head_tokens - less), max(0, shape.tail_tokens - less)
        )
