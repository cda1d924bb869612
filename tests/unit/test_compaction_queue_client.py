"""The compaction queue makes its SQS client on the first request, once, even under threads."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from adapters.compaction_queue import CompactionQueue
from adapters.conversation_store import ConversationKey

KEY = ConversationKey("acme", "c1")
NOW = datetime(2026, 6, 1, tzinfo=UTC)


class RecordingClient:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(kwargs)
        return {"MessageId": f"m{len(self.sent)}"}


def test_no_client_is_made_until_a_compaction_is_requested_and_then_one():
    made: list[RecordingClient] = []

    def make() -> RecordingClient:
        made.append(RecordingClient())
        return made[-1]

    queue = CompactionQueue(make, "https://queue")
    assert made == []
    assert queue.request_compaction(KEY, NOW) == "m1"
    assert queue.request_compaction(KEY, NOW) == "m2"
    assert len(made) == 1
    assert [m["QueueUrl"] for m in made[0].sent] == ["https://queue", "https://queue"]


def test_threads_sending_the_first_requests_together_share_one_client():
    made: list[RecordingClient] = []

    def slow_make() -> RecordingClient:
        time.sleep(0.05)  # wide enough for every thread to find no client yet
        made.append(RecordingClient())
        return made[-1]

    queue = CompactionQueue(slow_make, "https://queue")
    threads = [threading.Thread(target=queue.request_compaction, args=(KEY, NOW)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1
    assert len(made[0].sent) == 8
