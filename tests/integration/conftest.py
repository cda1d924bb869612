"""The converse handler under moto: real botocore clients, emulated AWS in-process."""

from __future__ import annotations

import importlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.aws_resources import create_queues, create_table
from local.compaction_poller import sqs_event
from local.proxy_events import invoke, proxy_event

AGENT_ROLE = "arn:aws:iam::123456789012:role/acme-agent"
RULES: dict[str, Any] = {
    "tenants": {
        "acme": {"historyDays": 30, "idleResetHours": 24, "maxTurnsPerConversation": 25},
        "defaults": {},
        "roomy": {"maxTurnsPerConversation": 1000},
        "limited": {"rateLimit": {"messages": 3, "perSeconds": 60}},
        "guarded": {"callers": [AGENT_ROLE]},
        "other": {"callers": ["arn:aws:iam::123456789012:role/other-agent"]},
        "capped": {"maxTurnsPerConversation": 2},  # escalates at its third message
    }
}
TABLE = "conversation-memory"
QUEUE = "compaction"


def load_handler(package: str = "converse_history") -> ModuleType:
    """A fresh import, so the module-level settings and clients see this test's world."""
    for name in [m for m in sys.modules if m.startswith(package)]:
        del sys.modules[name]
    return importlib.import_module(f"{package}.handler")


def iso(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Api:
    handler: ModuleType
    dynamodb: Any
    sqs: Any
    queue_url: str
    dlq_url: str
    monkeypatch: pytest.MonkeyPatch
    calls: list[str] = field(default_factory=list)

    def request(
        self, method: str, path: str, body: Any = None, caller: str | None = None
    ) -> tuple[int, Any]:
        raw = body if isinstance(body, str) or body is None else json.dumps(body)
        status, _, answer = invoke(
            self.handler.lambda_handler, proxy_event(method, path, raw, caller_arn=caller)
        )
        return status, answer

    def converse(
        self,
        text: str,
        *,
        tenant: str = "acme",
        contact: str = "c1",
        sent_at: datetime | None = None,
        message_id: str | None = None,
        caller: str | None = None,
        message: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        body: dict[str, Any] = message if message is not None else {"text": text}
        if sent_at is not None:
            body["sentAt"] = iso(sent_at)
        if message_id is not None:
            body["id"] = message_id
        return self.request(
            "POST", f"/v1/tenants/{tenant}/contacts/{contact}/converse", {"message": body}, caller
        )

    def reply(
        self,
        text: str,
        *,
        tenant: str = "acme",
        contact: str = "c1",
        sent_at: datetime | None = None,
        message_id: str | None = None,
        caller: str | None = None,
    ) -> tuple[int, Any]:
        body: dict[str, Any] = {"role": "assistant", "text": text}
        if sent_at is not None:
            body["sentAt"] = iso(sent_at)
        if message_id is not None:
            body["id"] = message_id
        return self.request("POST", f"/v1/tenants/{tenant}/contacts/{contact}/turns", body, caller)

    def compactor(self, **env: str) -> ModuleType:
        """The compactor Lambda's module, on the same table."""
        for name, value in env.items():
            self.monkeypatch.setenv(name, value)
        return load_handler("compactor")

    def received(self, visibility_timeout: int = 0) -> list[dict[str, Any]]:
        """Receive like Lambda's event source mapping; the messages as SQS event records."""
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=visibility_timeout,
            AttributeNames=["All"],
        ).get("Messages", [])
        return list(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:compaction")["Records"])

    def state(self, tenant: str = "acme", contact: str = "c1") -> dict[str, Any] | None:
        item = self.dynamodb.get_item(
            TableName=TABLE,
            Key={"PK": {"S": f"TENANT#{tenant}#CONTACT#{contact}"}, "SK": {"S": "TURN#~STATE"}},
        ).get("Item")
        return dict(item) if item else None

    def memory_item(self, tenant: str = "acme", contact: str = "c1") -> dict[str, Any]:
        """The memory now served (`TURN#~MEMORY`); empty when no fold was made."""
        item = self.dynamodb.get_item(
            TableName=TABLE,
            Key={"PK": {"S": f"TENANT#{tenant}#CONTACT#{contact}"}, "SK": {"S": "TURN#~MEMORY"}},
        ).get("Item")
        return dict(item) if item else {}

    def items(self) -> list[dict[str, Any]]:
        return list(self.dynamodb.scan(TableName=TABLE)["Items"])

    def turn_items(self) -> list[dict[str, Any]]:
        return [i for i in self.items() if i["SK"]["S"].startswith("TURN#2") or "turnId" in i]

    def queued(self) -> list[dict[str, Any]]:
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", [])
        return [json.loads(m["Body"]) for m in messages]


def request_record(tenant: str, contact: str, message_id: str = "m-1") -> dict[str, Any]:
    body = json.dumps({"tenantId": tenant, "contactId": contact})
    return {
        "messageId": message_id,
        "receiptHandle": f"handle-{message_id}",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:compaction",
        "awsRegion": "us-east-1",
    }


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(RULES))
    return path


def use_fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and a region for moto's in-process emulation, and no endpoint beside it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A DynamoDB client on moto, with the service's table (`TABLE`) created."""
    use_fake_credentials(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, TABLE)
        yield client


@pytest.fixture
def make_api(monkeypatch: pytest.MonkeyPatch, rules_file: Path) -> Iterator[Callable[..., Api]]:
    use_fake_credentials(monkeypatch)
    with mock_aws():
        dynamodb = boto3.client("dynamodb")
        sqs = boto3.client("sqs")
        create_table(dynamodb, TABLE)
        queue_url, dlq_url = create_queues(sqs, QUEUE)

        def build(**env: str) -> Api:
            monkeypatch.setenv("TABLE_NAME", TABLE)
            monkeypatch.setenv("COMPACTION_QUEUE_URL", queue_url)
            monkeypatch.setenv("RULES_FILE", str(rules_file))
            monkeypatch.setenv("CALLER_IDENTITY", "optional")
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            return Api(load_handler(), dynamodb, sqs, queue_url, dlq_url, monkeypatch)

        yield build


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()


def minutes_ago(n: float) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=n)


@pytest.fixture
def logs(api: Api) -> Iterator[io.StringIO]:
    """The handler's log stream, captured (Powertools binds its stream at import)."""
    stream = io.StringIO()
    previous = api.handler.logger.registered_handler.setStream(stream)
    yield stream
    api.handler.logger.registered_handler.setStream(previous)


def log_lines(captured: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in captured.splitlines() if line.startswith("{")]
