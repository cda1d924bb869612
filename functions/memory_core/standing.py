"""Where each retained turn stands for the next call (SPEC 12): what the model will see of it.

Every turn has exactly one standing, taken in this order:

1. `window`: the next call's history holds it as it was recorded;
2. `trimmed`: the history holds it with part of it cut (`omitted_tokens`, as its
   markers say);
3. `folded`: the memory the next call serves holds its gist (it is at or below the
   memory's watermark and not a late turn the memory has not folded yet);
4. `out_of_range`: older than the tenant's `historyDays`, so no window reads it;
5. `held_by_neither`: in range, yet neither in the window nor in the memory: the
   coverage gap of SPEC 5.7, which the model will not see at all.

A turn both in the window and folded is `window`: the model reads its words. A turn
out of range that the served memory holds is `folded`: the model reads its gist.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memory_core.trim import omission_marker
from memory_core.turns import Turn, TurnPosition

Standing = Literal["window", "trimmed", "folded", "out_of_range", "held_by_neither"]
STANDINGS: tuple[Standing, ...] = (
    "window",
    "trimmed",
    "folded",
    "out_of_range",
    "held_by_neither",
)

# The trim's own marker, its count made a group: one spelling of it, in `trim`.
_OMISSION = re.compile(re.escape(omission_marker(0)).replace("0", r"(\d+)"))


@dataclass(frozen=True, slots=True)
class TurnStanding:
    standing: Standing
    omitted_tokens: int = 0
    """Only for `trimmed`: the tokens the trim cut, as its markers in the turn say."""


@dataclass(frozen=True, slots=True)
class ServedMemory:
    """What the memory the next call serves holds: every turn up to `watermark` but the
    late ones (recorded after compaction passed their position, not folded yet)."""

    watermark: TurnPosition
    late: Collection[TurnPosition] = ()

    def holds(self, position: TurnPosition) -> bool:
        return position <= self.watermark and position not in self.late


def standings(
    retained: Iterable[Turn],
    window: Iterable[Turn],
    trimmed: Iterable[bool],
    *,
    memory: ServedMemory | None,
    since: datetime,
) -> dict[str, TurnStanding]:
    """Each retained turn's standing, by turn id.

    `window` and `trimmed` are the next call's history turns (as kept) and whether
    each was trimmed, in the same order; `memory` is None when the next call serves
    none; `since` is where the history range starts.
    """
    kept = {turn.id: (turn, flag) for turn, flag in zip(window, trimmed, strict=True)}
    found: dict[str, TurnStanding] = {}
    for turn in retained:
        if turn.id in kept:
            as_kept, was_trimmed = kept[turn.id]
            found[turn.id] = (
                TurnStanding("trimmed", omitted_tokens(turn, as_kept))
                if was_trimmed
                else TurnStanding("window")
            )
        elif memory is not None and memory.holds(turn.position):
            found[turn.id] = TurnStanding("folded")
        elif turn.sent_at < since:
            found[turn.id] = TurnStanding("out_of_range")
        else:
            found[turn.id] = TurnStanding("held_by_neither")
    return found


def omitted_tokens(original: Turn, as_kept: Turn) -> int:
    """The tokens a trim cut from `original`: its markers in `as_kept`, less any the
    original already carried as text of its own."""
    return _marked(as_kept.content) - _marked(original.content)


def counts(found: Mapping[str, TurnStanding]) -> dict[Standing, int]:
    """How many turns have each standing, every standing named."""
    tally = dict.fromkeys(STANDINGS, 0)
    for standing in found.values():
        tally[standing.standing] += 1
    return tally


def _marked(content: Iterable[Mapping[str, Any]]) -> int:
    return sum(int(n) for text in _texts(content) for n in _OMISSION.findall(text))


def _texts(value: Any) -> Iterable[str]:
    """Every string in a turn's content: texts, tool inputs and results, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)
