"""The compaction queue on SQS: one message asks for one conversation to be folded.

The message names the conversation only; the compactor reads what to fold from
the store, so a duplicate or late delivery folds nothing twice.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from adapters.conversation_store import ConversationKey, format_instant

DLQ_MAX_RECEIVES = 4
"""Receives before a compaction request goes to the dead-letter queue: the deployed
queue and the local one are made with the same bound."""


class SQSClient(Protocol):
    def send_message(self, **kwargs: Any) -> dict[str, Any]: ...


class CompactionQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def request_compaction(self, key: ConversationKey, requested_at: datetime) -> str:
        body = {
            "tenantId": key.tenant_id,
            "contactId": key.contact_id,
            "requestedAt": format_instant(requested_at),
        }
        response = self._client.send_message(
            QueueUrl=self._queue_url, MessageBody=json.dumps(body, separators=(",", ":"))
        )
        return str(response["MessageId"])
