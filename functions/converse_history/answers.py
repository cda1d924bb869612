"""The shapes of the converse answer: the window's, an escalation's, the memory's, a turn's.

A first answer and its replay are built by the same `window_answer`, so a
retry is answered as the first call was.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from adapters.conversation_store import format_instant
from converse_history.errors import ApiError
from memory_core.conversation import Fold
from memory_core.converse_shape import CachePoints, converse_fragment
from memory_core.repairs import Repair
from memory_core.rules import TenantRules
from memory_core.stable_window import previous_call_history
from memory_core.turns import Turn
from memory_core.window import Window


def window_answer(
    turn_count: int,
    turn: Turn,
    window: Window,
    fold: Fold | None,
    *,
    tenant: TenantRules,
) -> tuple[dict[str, Any], list[Repair]]:
    """The answer over `fold`, the memory already chosen and within the history range,
    and the fragment's repairs (which the caller reports, or not: a replay's were)."""
    history = window.messages()
    current = turn.as_message()
    # A replay follows the cache rules of now: the points change no content.
    cache = CachePoints.of(tenant.prompt_cache, tenant.prompt_cache_ttl)
    previous = previous_call_history(window) if tenant.prompt_cache == "stable" else None
    fragment = converse_fragment(
        history,
        current,
        fold.summary if fold else None,
        cache,
        previous_history=previous,
    )
    answer = {
        "decision": "model",
        "reason": None,
        "turnCount": turn_count,
        "history": history,
        "current": current,
        "memory": memory_view(fold),
        "window": {
            "kept": window.kept,
            "dropped": window.dropped,
            "trimmed": window.trimmed,
            "repaired": len(fragment.repairs),
            "estimatedTokens": window.estimated_tokens,
        },
        "converse": fragment.as_json(),
    }
    return answer, fragment.repairs


def escalation(turn_count: int, turn: Turn) -> dict[str, Any]:
    return {
        "decision": "escalate",
        "reason": "turn_cap",
        "turnCount": turn_count,
        "current": turn.as_message(),
    }


def rate_limited(wait_seconds: int) -> ApiError:
    """429, saying when: the same whole seconds in `Retry-After` and in the body."""
    return ApiError(
        429,
        "rate_limited",
        f"too many messages from this contact; not recorded; retry in {wait_seconds} s",
        details={"retryAfterSeconds": wait_seconds},
        headers={"Retry-After": str(wait_seconds)},
    )


def fold_in_range(fold: Fold | None, since: datetime) -> Fold | None:
    """A fold whose newest turn is older than the history range is not served."""
    if fold is None or fold.covers_until < since:
        return None
    return fold


def memory_view(fold: Fold | None) -> dict[str, Any] | None:
    if fold is None:
        return None
    return {
        "summary": fold.summary,
        "coversFrom": format_instant(fold.covers_from),
        "coversUntil": format_instant(fold.covers_until),
        "turnsFolded": fold.turns_folded,
    }


def turn_view(turn: Turn) -> dict[str, Any]:
    return {**turn.as_message(), "id": turn.id, "sentAt": format_instant(turn.sent_at)}
