"""`DELETE /v1/tenants/{t}/contacts/{c}`: everything stored for a contact, erased for good.

The erase fences the conversation off first (`adapters.dynamodb_erasure`): from
the moment it answers, nothing recorded before it is served again, by a
converse, a replay, the memory or the export, and a compaction in flight
commits nothing. Then it deletes what the fence covers, up to
`ITEMS_PER_INVOCATION`; what is left is carried on from the compaction queue
(`carry_on`, by the compactor), a message at a time, until nothing is.
The answer is 200 when everything went, 202 when the rest goes asynchronously.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from adapters.conversation_store import (
    ConversationData,
    ConversationKey,
    Deleted,
    Fence,
    format_instant,
)
from adapters.rules_source import RulesSource
from converse_history.access import Caller, tenant_for

ITEMS_PER_INVOCATION = 5000
"""Deleted before an invocation hands the rest to the queue: some 200 batch writes,
a few seconds, well inside API Gateway's 29-second limit."""


class ErasureQueue(Protocol):
    def continue_erasure(self, key: ConversationKey, fence: Fence) -> str: ...


class ErasureTelemetry(Protocol):
    def contact_erased(self, key: ConversationKey, items: int, *, complete: bool) -> None: ...


class DeletionTelemetry(Protocol):
    def erasure_continued(self, key: ConversationKey, items: int, *, complete: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class Erasure:
    items: int
    complete: bool
    erased_at: datetime

    @property
    def status(self) -> int:
        return 200 if self.complete else 202

    def as_json(self) -> dict[str, Any]:
        return {
            "erased": {"items": self.items, "complete": self.complete},
            "erasedAt": format_instant(self.erased_at),
        }


class ErasureDeletion:
    """Deletes a share of what a fence covers; queues the rest. The compactor runs it
    for the shares the queue carries."""

    def __init__(
        self,
        *,
        store: ConversationData,
        queue: ErasureQueue,
        telemetry: DeletionTelemetry,
        items_per_invocation: int = ITEMS_PER_INVOCATION,
    ) -> None:
        self._store = store
        self._queue = queue
        self._telemetry = telemetry
        self._items_per_invocation = items_per_invocation

    def share(self, key: ConversationKey, fence: Fence) -> Deleted:
        deleted = self._store.delete_fenced(key, fence, max_items=self._items_per_invocation)
        if not deleted.complete:
            self._queue.continue_erasure(key, fence)
        return deleted

    def carry_on(self, key: ConversationKey, fence: Fence) -> Deleted:
        """A share queued by an erase (or by the share before it)."""
        deleted = self.share(key, fence)
        self._telemetry.erasure_continued(key, deleted.items, complete=deleted.complete)
        return deleted


class ContactErasure:
    def __init__(
        self,
        *,
        store: ConversationData,
        rules: RulesSource,
        deletion: ErasureDeletion,
        telemetry: ErasureTelemetry,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._rules = rules
        self._deletion = deletion
        self._telemetry = telemetry
        self._clock = clock

    def erase(self, tenant_id: str, contact_id: str, caller: Caller) -> Erasure:
        tenant_for(self._rules, tenant_id, caller)
        key = ConversationKey(tenant_id, contact_id)
        now = datetime.fromtimestamp(self._clock(), UTC)
        fence = self._store.fence_off(key, now)
        if fence is None:
            erasure = Erasure(0, complete=True, erased_at=now)
        else:
            deleted = self._deletion.share(key, fence)
            # The state counts once: its counters, memory, rate records and listing went with it.
            items = deleted.items + (1 if fence.state_erased else 0)
            erasure = Erasure(items, deleted.complete, fence.erased_at)
        self._telemetry.contact_erased(key, erasure.items, complete=erasure.complete)
        return erasure
