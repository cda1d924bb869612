"""A rate-limited answer says when to come back, and the limit counts arrivals, not `sentAt`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from local.proxy_events import LambdaContextStandIn, proxy_event
from tests.integration.conftest import Api, iso

LIMITED = "/v1/tenants/limited/contacts/c1/converse"  # 3 messages per 60 seconds


class Clock:
    """The service's clock, moved by the test: arrivals happen when it says."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> float:
        return self.now.timestamp()

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def send(api: Api, text: str, **message: Any) -> tuple[int, dict[str, str], Any]:
    """The status, the headers as API Gateway sends them, and the JSON body."""
    body = json.dumps({"message": {"text": text, **message}})
    answer = api.handler.lambda_handler(proxy_event("POST", LIMITED, body), LambdaContextStandIn())
    headers = dict(answer.get("headers") or {})
    headers.update({k: v[-1] for k, v in (answer.get("multiValueHeaders") or {}).items()})
    return answer["statusCode"], headers, json.loads(answer["body"])


def with_clock(api: Api, monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(api.handler.SERVICE, "_clock", clock)
    return clock


def test_a_429_carries_retry_after_and_the_same_figure_in_its_body(api, monkeypatch):
    clock = with_clock(api, monkeypatch)
    for _ in range(3):
        assert send(api, "hi")[0] == 200
        clock.advance(10)
    status, headers, answer = send(api, "one too many")  # 30 s after the first
    assert status == 429
    assert answer["error"]["code"] == "rate_limited"
    assert headers["Retry-After"] == "30"
    assert answer["error"]["retryAfterSeconds"] == 30
    assert "30 s" in answer["error"]["message"]
    clock.advance(29.5)
    status, headers, answer = send(api, "still too soon")
    assert (status, headers["Retry-After"], answer["error"]["retryAfterSeconds"]) == (429, "1", 1)
    clock.advance(0.5)
    assert send(api, "now there is room")[0] == 200


def test_a_backdated_sent_at_does_not_step_around_the_limit(api, monkeypatch):
    clock = with_clock(api, monkeypatch)
    start = clock.now - timedelta(hours=2)
    answers = []
    for n in range(6):  # all within two seconds, each claiming to be 61 s after the last
        answers.append(send(api, f"m{n}", sentAt=iso(start + timedelta(seconds=61 * n)))[0])
        clock.advance(0.3)
    assert answers == [200, 200, 200, 429, 429, 429]
    assert len(api.turn_items()) == 3


def test_a_retry_of_a_recorded_message_is_answered_while_limited(api, monkeypatch):
    clock = with_clock(api, monkeypatch)
    first = [send(api, f"m{n}", id=f"id-{n}") for n in range(3)]
    clock.advance(1)
    status, _, again = send(api, "m2", id="id-2")
    assert status == 200
    assert again == first[2][2]
    assert send(api, "m3", id="id-3")[0] == 429


def test_a_refused_message_does_not_count(api, monkeypatch):
    clock = with_clock(api, monkeypatch)
    for _ in range(3):
        send(api, "hi")
    for _ in range(5):
        clock.advance(10)
        assert send(api, "refused")[0] == 429
    clock.advance(10)  # 60 s after the first three: their slots are free
    assert [send(api, f"ok {n}")[0] for n in range(4)] == [200, 200, 200, 429]
