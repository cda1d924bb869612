"""The compaction queue on SQS: one message asks for one conversation to be folded.

The message names the conversation only; the compactor reads what to fold from
the store, so a duplicate or late delivery folds nothing twice. The same queue
carries the rest of an erase too large for one invocation (with its fence):
the compactor has the table, and a deletion is as idempotent as a fold.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from adapters.conversation_store import ConversationKey, Fence, format_instant

DLQ_MAX_RECEIVES = 4
"""Receives before a compaction request goes to the dead-letter queue: the deployed
queue and the local one are made with the same bound."""


class SQSClient(Protocol):
    def send_message(self, **kwargs: Any) -> dict[str, Any]: ...


class CompactionQueue:
    """The queue; its SQS client is made when the first request is sent.

    Most converse calls request no compaction: a cold start should not pay for
    an SQS client it may never use (docs/performance.md).
    """

    def __init__(self, make_client: Callable[[], SQSClient], queue_url: str) -> None:
        self._make_client = make_client
        self._client: SQSClient | None = None
        self._lock = threading.Lock()
        self._queue_url = queue_url

    def _sqs(self) -> SQSClient:
        if self._client is None:
            # The local runner serves calls on threads, and boto3 does not build
            # clients thread-safely.
            with self._lock:
                if self._client is None:
                    self._client = self._make_client()
        return self._client

    def close(self) -> None:
        """Forget the client, and its pooled connections; the next request makes a new one."""
        with self._lock:
            self._client = None

    def request_compaction(self, key: ConversationKey, requested_at: datetime) -> str:
        body = {
            "tenantId": key.tenant_id,
            "contactId": key.contact_id,
            "requestedAt": format_instant(requested_at),
        }
        response = self._sqs().send_message(
            QueueUrl=self._queue_url, MessageBody=json.dumps(body, separators=(",", ":"))
        )
        return str(response["MessageId"])

    def continue_erasure(self, key: ConversationKey, fence: Fence) -> str:
        """Ask the compactor to carry on deleting what an erase's fence covers.

        The fence travels with the request: the state may hold a newer one by the
        time it is read, and this deletion must not reach past its own erase.
        """
        body = {
            "tenantId": key.tenant_id,
            "contactId": key.contact_id,
            "erase": {
                "erasedAt": format_instant(fence.erased_at),
                "foldsBelow": fence.folds_below,
            },
        }
        response = self._sqs().send_message(
            QueueUrl=self._queue_url, MessageBody=json.dumps(body, separators=(",", ":"))
        )
        return str(response["MessageId"])
