"""A conversation's state: what a new one holds, and which turns count as late."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core.conversation import NEW_CONVERSATION, ConversationState, Fold
from memory_core.turn_cap import NO_STREAK
from memory_core.turns import TurnPosition

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def at(minutes: int, turn_id: str = "m") -> TurnPosition:
    moment = T0 + timedelta(minutes=minutes)
    return TurnPosition(moment, moment, turn_id)


def test_a_new_conversation_has_recorded_nothing_and_owes_nothing() -> None:
    assert (
        ConversationState(
            version=0,
            streak=NO_STREAK,
            recent_contact=(),
            unfolded_tokens=0,
            unfolded_turns=0,
            lease_until=None,
            fold=None,
            watermark=None,
            folding_through=None,
            late_turns=(),
            compaction_version=0,
            turns_recorded=0,
            stable_edge=None,
        )
        == NEW_CONVERSATION
    )
    assert (NEW_CONVERSATION.version, NEW_CONVERSATION.compaction_version) == (0, 0)
    assert (NEW_CONVERSATION.unfolded_tokens, NEW_CONVERSATION.unfolded_turns) == (0, 0)
    assert NEW_CONVERSATION.turns_recorded == 0
    assert NEW_CONVERSATION.streak.count == 0


def test_a_fold_of_unknown_version_says_0() -> None:
    fold = Fold("summary", covers_from=T0, covers_until=T0, turns_folded=2)
    assert fold.version == 0


def test_nothing_is_late_before_compaction_has_passed_any_turn() -> None:
    assert NEW_CONVERSATION.late_bound is None
    assert not NEW_CONVERSATION.is_late(at(-10_000))


@pytest.mark.parametrize(
    ("watermark", "folding_through", "bound"),
    [
        (at(5), None, at(5)),
        (None, at(7), at(7)),
        (at(5), at(7), at(7)),
        # A claim below the watermark (a stale one) does not lower the bound.
        (at(9), at(7), at(9)),
    ],
)
def test_the_late_bound_is_the_newer_of_the_watermark_and_the_claim(
    watermark: TurnPosition | None, folding_through: TurnPosition | None, bound: TurnPosition
) -> None:
    state = ConversationState(watermark=watermark, folding_through=folding_through)
    assert state.late_bound == bound


def test_a_turn_at_or_below_the_bound_is_late_and_one_above_is_not() -> None:
    state = ConversationState(watermark=at(5, "m5"))
    assert state.is_late(at(4))
    assert state.is_late(at(5, "m5"))
    # Same `sentAt` and arrival, a later id: after the bound.
    assert not state.is_late(at(5, "m6"))
    assert not state.is_late(at(6))


def test_a_new_conversation_is_not_listed_yet_and_holds_what_it_will_record():
    # Its first commit lists it in the contacts index; an erase has left nothing in it.
    assert NEW_CONVERSATION.listed is False
    assert NEW_CONVERSATION.holds_nothing is False


def test_an_erased_state_holds_nothing_until_a_turn_is_recorded_after_the_erase():
    fence = datetime(2026, 5, 1, tzinfo=UTC)
    assert ConversationState(version=3, erased_at=fence).holds_nothing
    assert not ConversationState(version=3, erased_at=fence, turns_recorded=1).holds_nothing
    assert not ConversationState(version=3, turns_recorded=0).holds_nothing
