"""Lambda's SQS event source mapping, locally: the compactor fed from the local queue.

Batches of up to ten, a visibility timeout, the handler's `batchItemFailures`
honoured (failed messages are not deleted and come back when their
visibility times out), and the queue's redrive policy moves a message that
keeps failing to the local dead-letter queue, as in AWS.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from local.proxy_events import LambdaContextStandIn

BATCH_SIZE = 10
VISIBILITY_TIMEOUT_SECONDS = 5
IDLE_POLL_SECONDS = 0.5
"""Short polls, never long ones: the emulator answers one request at a time."""

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": queue_arn.split(":")[3],
            }
            for message in messages
        ]
    }


class CompactionPoller:
    name = "compaction-poller"

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: LambdaHandler,
        invocations: threading.Lock,
        visibility_timeout: int = VISIBILITY_TIMEOUT_SECONDS,
    ) -> None:
        self._sqs = sqs
        self._visibility_timeout = visibility_timeout
        self._queue_url = queue_url
        self._handler = handler
        self._invocations = invocations
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.batches = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stopping.is_set():
            if not self.poll_once():
                self._stopping.wait(IDLE_POLL_SECONDS)

    def poll_once(self) -> bool:
        """One receive and, if anything came, one invocation; whether anything came."""
        messages = self._sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=BATCH_SIZE,
            VisibilityTimeout=self._visibility_timeout,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return False
        event = sqs_event(messages, self._queue_arn)
        # One invocation at a time in this process, as in a Lambda environment.
        with self._invocations:
            try:
                response = self._handler(event, LambdaContextStandIn(function_name="compactor"))
            except Exception:
                # As a Lambda's failed invocation: logged, and the batch is delivered again.
                traceback.print_exc(file=sys.stderr)
                return True
        failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(done)
                ],
            )
        self.batches += 1
        return True
