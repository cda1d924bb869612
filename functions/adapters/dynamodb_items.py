"""The conversation table's items: their keys, and their codecs to and from the domain.

Single-table layout, every key prefixed by the tenant:

| item | PK | SK |
| --- | --- | --- |
| turn | `TENANT#t#CONTACT#c` | `TURN#<sentAt>#<recordedAt>#<turnId>` |
| message-id marker | same | `MSGID#<turnId>` |
| memory as a compaction wrote it | same | `FOLD#<compaction version>` |
| the memory now served | same | `TURN#~MEMORY` |
| conversation state | same | `TURN#~STATE` |

The state item of a conversation with anything stored also carries the keys of
the contacts index (`adapters.contacts_index`): `contactsShard`
(`TENANT#t#SHARD#nn`) and `contactId`, written once, when the conversation starts.

The state's sort key sorts after every turn (`~` follows the digits), and the
memory's between them, so one newest-first Query reads the state, the memory
and the newest turns of the history range together. The memory has an item of
its own so that the state, which every converse call and every reply rewrites
in a transaction billed on the larger of its old and new sizes, stays small:
only a compaction writes the summary.

Items are in the low-level client's shape, (de)serialised here by hand, because
content travels as one JSON string attribute: DynamoDB's own map encoding would
turn numbers inside tool inputs into Decimals and cost more to decode.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from adapters.contacts_index import CONTACT_ID_ATTRIBUTE, CONTACTS_SHARD_ATTRIBUTE, CONTACTS_SHARDS
from adapters.conversation_store import (
    RecordedTurn,
    StoredTurn,
    content_digest,
    format_instant,
    parse_instant,
)
from memory_core.conversation import ConversationState, Fold, LateTurn
from memory_core.history_range import is_expired
from memory_core.stable_window import StableEdge
from memory_core.turn_cap import Streak
from memory_core.turns import TextCut, Turn, TurnPosition
from memory_core.usage import TokenUsage

STATE_SK = "TURN#~STATE"
MEMORY_SK = "TURN#~MEMORY"
"""The memory now served: after every turn, before the state (`M` sorts before `S`)."""
MEMORY_VERSION_ATTRIBUTE = "foldSummaryVersion"
"""A memory item's compaction version (`Fold.version`)."""
TURN_PREFIX = "TURN#"
MARKER_PREFIX = "MSGID#"
FOLD_PREFIX = "FOLD#"
FOLD_VERSION_DIGITS = 12
"""Fixed width, so the memory items sort by version."""
TTL_ATTRIBUTE = "expiresAt"
STATED_SENT_AT_ATTRIBUTE = "statedSentAt"
"""A turn item whose sender's clock ran ahead: the `sentAt` it gave (`sentAt` is its arrival)."""
COST_UNITS_ATTRIBUTE = "costUnits"
"""A turn's token estimate in cost units, made as it was recorded: a window reads it
instead of estimating again. Items from before the estimate had it lack it and are
estimated when read; an estimate that changes its units takes a new name."""
TEXT_CUT_ATTRIBUTE = "textCut"
"""A long text turn's cut by the trim (`TextCut`, flat), made as it was recorded."""
USAGE_ATTRIBUTE = "usage"
"""A reply's turn item: the model's token usage, as reported with it."""
LAST_WINDOW_AT = "lastWindowAt"
"""The state's `ConversationState.last_window_at`."""
ERASED_AT = "erasedAt"
"""The state's `ConversationState.erased_at`: the fence of the contact's latest erase."""
RECORDED_AT = "recordedAt"
"""A marker's turn's arrival, which a write after an erase compares with the fence."""
TURNS_END = TURN_PREFIX + "~"
"""Sorts after every turn key and before the state's (`TURN#~STATE`)."""

Item = dict[str, dict[str, Any]]


# -- keys ----------------------------------------------------------------------------


def item_key(partition: str, sort_key: str) -> Item:
    return {"PK": {"S": partition}, "SK": {"S": sort_key}}


def turn_sort_key(position: TurnPosition) -> str:
    """Sorts as the positions do: fixed-width instants, then the id."""
    sent, recorded = format_instant(position.sent_at), format_instant(position.recorded_at)
    return f"{TURN_PREFIX}{sent}#{recorded}#{position.turn_id}"


def position_of(sort_key: str) -> TurnPosition:
    sent, recorded, turn_id = sort_key.removeprefix(TURN_PREFIX).split("#", 2)
    return TurnPosition(parse_instant(sent), parse_instant(recorded), turn_id)


def marker_sort_key(turn_id: str) -> str:
    return MARKER_PREFIX + turn_id


def fold_sort_key(version: int) -> str:
    return f"{FOLD_PREFIX}{version:0{FOLD_VERSION_DIGITS}d}"


def erased_through(erased_at: datetime) -> str:
    """A sort key after every turn placed at or before an erase's fence, and before
    every turn placed after it (`memory_core.erasure`)."""
    return f"{TURN_PREFIX}{format_instant(erased_at)}#~"


def fold_version_of(sort_key: str) -> int:
    return int(sort_key.removeprefix(FOLD_PREFIX))


def contacts_shard(tenant_id: str, shard: int) -> str:
    return f"TENANT#{tenant_id}#SHARD#{shard:02d}"


def shard_of(contact_id: str) -> int:
    """A stable shard for the contact: a hash, so one tenant's contacts spread evenly."""
    digest = hashlib.sha256(contact_id.encode()).digest()
    return int.from_bytes(digest[:4], "big") % CONTACTS_SHARDS


def contacts_entry(tenant_id: str, contact_id: str) -> Item:
    """The state's attributes that list the contact in the contacts index."""
    return {
        CONTACTS_SHARD_ATTRIBUTE: {"S": contacts_shard(tenant_id, shard_of(contact_id))},
        CONTACT_ID_ATTRIBUTE: {"S": contact_id},
    }


# -- turns ---------------------------------------------------------------------------


def turn_item(partition: str, turn: Turn, *, encoded: str, tokens: int, ttl: int) -> Item:
    """The turn as stored; `encoded` is its content as one JSON string."""
    item: Item = {
        **item_key(partition, turn_sort_key(turn.position)),
        "turnId": {"S": turn.id},
        "role": {"S": turn.role},
        "sentAt": {"S": format_instant(turn.sent_at)},
        "content": {"S": encoded},
        "tokens": {"N": str(tokens)},
        TTL_ATTRIBUTE: {"N": str(ttl)},
    }
    if turn.stated_sent_at is not None:
        item[STATED_SENT_AT_ATTRIBUTE] = {"S": format_instant(turn.stated_sent_at)}
    if turn.cost_units is not None:
        item[COST_UNITS_ATTRIBUTE] = {"N": str(turn.cost_units)}
    if turn.text_cut is not None:
        item[TEXT_CUT_ATTRIBUTE] = {"L": [{"N": str(n)} for n in _flat(turn.text_cut)]}
    return item


def _flat(cut: TextCut) -> list[int]:
    return [*cut.shape, cut.head, cut.tail, cut.omitted, cut.units]


def _text_cut(item: Mapping[str, Any]) -> TextCut | None:
    if TEXT_CUT_ATTRIBUTE not in item:
        return None
    budget, head_tokens, tail_tokens, head, tail, omitted, units = (
        int(n["N"]) for n in item[TEXT_CUT_ATTRIBUTE]["L"]
    )
    return TextCut((budget, head_tokens, tail_tokens), head, tail, omitted, units)


def turn_from(item: Mapping[str, Any]) -> Turn:
    position = position_of(item["SK"]["S"])
    return Turn(
        id=item["turnId"]["S"],
        role=item["role"]["S"],
        content=json.loads(item["content"]["S"]),
        sent_at=position.sent_at,
        recorded_at=position.recorded_at,
        stated_sent_at=_instant(item, STATED_SENT_AT_ATTRIBUTE),
        cost_units=_number(item, COST_UNITS_ATTRIBUTE) if COST_UNITS_ATTRIBUTE in item else None,
        text_cut=_text_cut(item),
    )


def stored_from(item: Mapping[str, Any], now: datetime) -> StoredTurn:
    expired = is_expired(int(item[TTL_ATTRIBUTE]["N"]), now)
    usage = item.get(USAGE_ATTRIBUTE)
    return StoredTurn(
        turn_from(item),
        _number(item, "tokens"),
        expired,
        usage=_usage_from(usage["M"]) if usage else None,
    )


def usage_attribute(usage: TokenUsage | None) -> Item:
    """The turn item's `usage`: the fields the model reported, as numbers."""
    if usage is None:
        return {}
    reported = {name: {"N": str(value)} for name, value in usage.as_json().items()}
    return {USAGE_ATTRIBUTE: {"M": reported}}


def _usage_from(reported: Mapping[str, Any]) -> TokenUsage:
    return TokenUsage.from_json({name: value["N"] for name, value in reported.items()})


# -- message-id markers --------------------------------------------------------------


def marker_item(partition: str, turn: Turn, *, ttl: int) -> Item:
    """What identifies the message id's first recording: where its turn is, and its digest."""
    return {
        **item_key(partition, marker_sort_key(turn.id)),
        "turnSk": {"S": turn_sort_key(turn.position)},
        "role": {"S": turn.role},
        "digest": {"S": content_digest(turn.role, list(turn.content))},
        RECORDED_AT: {"S": format_instant(turn.position.recorded_at)},
        TTL_ATTRIBUTE: {"N": str(ttl)},
    }


def marker_answer(
    turn_count: int,
    decision: str,
    dropped: int | None,
    memory_version: int,
    window_from: TurnPosition | None,
) -> Item:
    """What a converse answered, kept with the message id so that a retry gets the same."""
    extra: Item = {
        "turnCount": {"N": str(turn_count)},
        "decision": {"S": decision},
        "memoryVersion": {"N": str(memory_version)},
    }
    if dropped is not None:
        extra["dropped"] = {"N": str(dropped)}
    if window_from is not None:
        extra["windowFrom"] = {"S": turn_sort_key(window_from)}
    return extra


def marker_from(item: Mapping[str, Any]) -> RecordedTurn:
    decision = item.get("decision")
    return RecordedTurn(
        position=position_of(item["turnSk"]["S"]),
        role=item["role"]["S"],
        digest=item["digest"]["S"],
        turn_count=_number(item, "turnCount") if "turnCount" in item else None,
        decision=decision["S"] if decision else None,
        dropped=_number(item, "dropped") if "dropped" in item else None,
        memory_version=_number(item, "memoryVersion") if "memoryVersion" in item else None,
        window_from=_position(item, "windowFrom"),
    )


# -- the conversation state and its memory -------------------------------------------


def state_from(item: Mapping[str, Any]) -> ConversationState:
    """The state item's state. Its memory is read from the memory item beside it
    (`DynamoDBReads`); a state written before that item existed carries its own."""
    lease = item.get("leaseUntil")
    recent = item.get("recentContact", {}).get("L", [])
    return ConversationState(
        version=_number(item, "version"),
        streak=Streak(_number(item, "streakCount"), _instant(item, "lastContactAt")),
        recent_contact=tuple(parse_instant(value["S"]) for value in recent),
        unfolded_tokens=max(0, _number(item, "unfoldedTokens")),
        unfolded_turns=max(0, _number(item, "unfoldedTurns")),
        lease_until=datetime.fromtimestamp(int(lease["N"]), UTC) if lease else None,
        fold=fold_from(item),
        watermark=_position(item, "foldWatermark"),
        folding_through=_position(item, "foldingThrough"),
        late_turns=tuple(_late_turn(v["M"]) for v in item.get("lateTurns", {}).get("L", [])),
        compaction_version=_number(item, "foldVersion"),
        turns_recorded=_number(item, "turnsRecorded"),
        stable_edge=_stable_edge_from(item),
        last_window_at=_instant(item, LAST_WINDOW_AT),
        erased_at=_instant(item, ERASED_AT),
        listed=CONTACTS_SHARD_ATTRIBUTE in item,
    )


def erased_state_item(
    partition: str, erased_at: datetime, *, version: int, compaction_version: int, ttl: int
) -> Item:
    """What an erase leaves of the state: its fence, and the two locks moved on.

    The version moves so that a converse call in flight commits nothing it read
    before; the compaction version, so that a compaction in flight writes
    nothing back. Nothing else is kept: no counter, rate record, memory or listing.
    """
    return {
        **item_key(partition, STATE_SK),
        "version": {"N": str(version)},
        "foldVersion": {"N": str(compaction_version)},
        ERASED_AT: {"S": format_instant(erased_at)},
        TTL_ATTRIBUTE: {"N": str(ttl)},
    }


def _late_turn(entry: Mapping[str, Any]) -> LateTurn:
    return LateTurn(position_of(entry["sk"]["S"]), int(entry["tokens"]["N"]))


def fold_item(partition: str, fold: Fold, *, ttl: int, sort_key: str | None = None) -> Item:
    """The memory a compaction wrote, kept as its own item under its version; with
    `sort_key=MEMORY_SK`, the memory now served."""
    return {
        **item_key(partition, sort_key or fold_sort_key(fold.version)),
        "foldSummary": {"S": fold.summary},
        "foldCoversFrom": {"S": format_instant(fold.covers_from)},
        "foldCoversUntil": {"S": format_instant(fold.covers_until)},
        "turnsFolded": {"N": str(fold.turns_folded)},
        MEMORY_VERSION_ATTRIBUTE: {"N": str(fold.version)},
        TTL_ATTRIBUTE: {"N": str(ttl)},
    }


FOLD_ATTRIBUTES = (
    "foldSummary",
    "foldCoversFrom",
    "foldCoversUntil",
    "turnsFolded",
    MEMORY_VERSION_ATTRIBUTE,
)
"""A memory's attributes: on its own items, and on a state written before it had one."""


def fold_from(item: Mapping[str, Any]) -> Fold | None:
    """The fold in a memory item or an older state item (the two use the same attributes)."""
    if "foldSummary" not in item:
        return None
    covers_from = _instant(item, "foldCoversFrom")
    covers_until = _instant(item, "foldCoversUntil")
    # The compactor writes the covered range with the summary, always.
    assert covers_from is not None
    assert covers_until is not None
    return Fold(
        summary=item["foldSummary"]["S"],
        covers_from=covers_from,
        covers_until=covers_until,
        turns_folded=_number(item, "turnsFolded"),
        # A summary written before versions were kept: the state's compaction version.
        version=_number(item, MEMORY_VERSION_ATTRIBUTE, _number(item, "foldVersion")),
    )


def stable_edge_update(edge: StableEdge | None, sets: list[str], values: Item) -> str:
    """The edge's attributes SET into `sets` and `values`; or the REMOVE clause clearing them."""
    if edge is None:
        return " REMOVE windowEdge, windowMemory, windowWatermark"
    sets += ["windowEdge = :window_edge", "windowMemory = :window_memory"]
    values[":window_edge"] = {"S": turn_sort_key(edge.oldest)}
    values[":window_memory"] = {"N": str(edge.memory_version)}
    if edge.watermark is None:
        return " REMOVE windowWatermark"
    sets.append("windowWatermark = :window_watermark")
    values[":window_watermark"] = {"S": turn_sort_key(edge.watermark)}
    return ""


def _stable_edge_from(item: Mapping[str, Any]) -> StableEdge | None:
    oldest = _position(item, "windowEdge")
    if oldest is None:
        return None
    return StableEdge(oldest, _number(item, "windowMemory"), _position(item, "windowWatermark"))


# -- attributes ----------------------------------------------------------------------


def _number(item: Mapping[str, Any], name: str, default: int = 0) -> int:
    value = item.get(name)
    return int(value["N"]) if value else default


def _instant(item: Mapping[str, Any], name: str) -> datetime | None:
    value = item.get(name)
    return parse_instant(value["S"]) if value else None


def _position(item: Mapping[str, Any], name: str) -> TurnPosition | None:
    value = item.get(name)
    return position_of(value["S"]) if value else None
