"""What the tests of the client's framework adapters share: the service they run against.

Each adapter's tests (Strands, LangChain, the OpenAI Agents SDK) run against the
converse handler under moto with a window capped at `CAP` messages, reached
through the client's Lambda transport; the suite's tenant `capped` escalates at
its third message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conversation_memory_client import MemoryClient
from tests.integration.conftest import Api
from tests.support.lambda_stand_in import FUNCTION, FakeLambda

CAP = 6
"""HISTORY_WINDOW_MAX_MESSAGES here: a tool loop of 8 calls is 17 messages past its question."""
LOOP = 8


@dataclass
class Service:
    api: Api
    client: MemoryClient


def service_for_agents(make_api: Callable[..., Api]) -> Service:
    """The handler with the window capped at `CAP`, and a client invoking it directly."""
    api = make_api(HISTORY_WINDOW_MAX_MESSAGES=str(CAP), HISTORY_WINDOW_FLOOR_MESSAGES="4")
    return Service(api, MemoryClient.over_lambda(FUNCTION, lambda_client=FakeLambda(api.handler)))
