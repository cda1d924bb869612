"""`MemoryClient`: converse, record, memory, recall and a conversation's data (export, list,
erase), over the HTTP API or the Lambda, with retries.

A call is tried up to `max_attempts` times while the service throttles or
fails (a 5xx, API Gateway's own 429, Lambda's throttling, a lost connection),
sleeping an exponentially growing, jittered delay between attempts. A refusal
(any other 4xx, our own `rate_limited` 429 included) is raised at once: trying
the same request again would be refused again.

Every retry is safe because a message's id is drawn once per call, before the
first attempt: when an attempt committed but its answer was lost, the next
attempt replays the same id and the service answers what it recorded then,
storing nothing twice. The other calls are safe to retry as they are: the
listings, the preview and recall only read, and an erase that already ran erases
nothing more.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal

import botocore.session

from conversation_memory_client.configuration import CONFIGURATION_ERRORS, not_configured
from conversation_memory_client.errors import (
    ServiceUnavailable,
    error_code_and_message,
    error_for,
)
from conversation_memory_client.results import (
    ContactSummary,
    ConverseResult,
    Erasure,
    ExportedTurn,
    MemoryView,
    RecallResult,
    RecordedTurn,
    WindowPreview,
)
from conversation_memory_client.transports import (
    Answer,
    Call,
    HttpTransport,
    LambdaTransport,
    TransientFailure,
    Transport,
    region_of_api,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS = 4
BASE_DELAY_SECONDS = 0.25
"""The first retry waits up to this; each later one up to twice the one before."""
MAX_DELAY_SECONDS = 8.0
"""No wait is longer, whatever the attempt or the gateway's `Retry-After`."""
DEFAULT_PAGE_SIZE = 100
"""A listing's page when the caller does not say: the service's own default."""
MAX_PAGE_SIZE = 500
"""The most a listing's page may hold (the service refuses a larger `limit`)."""
DEFAULT_RECALL_LIMIT = 5
"""The passages a recall answers when the caller does not say: the service's own default."""
MAX_RECALL_LIMIT = 20
"""The most passages a recall may ask for (the service refuses a larger `limit`)."""

Sleep = Callable[[float], None]


def new_message_id() -> str:
    """A fresh message id (a UUID, as the Step Functions workflow draws its own)."""
    return str(uuid.uuid4())


class MemoryClient:
    """The conversation-memory service for one agent: `converse`, `record`, `memory`,
    `recall` (older turns' exact words); and a conversation's data: `turns` (its export),
    `contacts` (the tenant's) and `forget`.

    Make one with `over_http` (the API, SigV4-signed) or `over_lambda` (the
    function invoked directly); both answer the same values and raise the same
    exceptions (`conversation_memory_client.errors`). A client is safe to share
    between threads.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        sleep: Sleep = time.sleep,
        jitter: Callable[[], float] = random.random,
        draw_message_id: Callable[[], str] = new_message_id,
    ) -> None:
        """`sleep` waits between attempts and `jitter` draws in [0, 1): both injectable,
        so tests neither wait nor depend on chance."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._transport = transport
        self._max_attempts = max_attempts
        self._sleep = sleep
        self._jitter = jitter
        self._draw_message_id = draw_message_id

    @classmethod
    def over_http(
        cls,
        api_url: str,
        *,
        region: str | None = None,
        session: botocore.session.Session | None = None,
        sign: bool | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        timeout_seconds: float = 10.0,
        sleep: Sleep = time.sleep,
        http_session: Any | None = None,
    ) -> MemoryClient:
        """A client of the HTTP API at `api_url` (the stack's `ApiUrl`, stage included,
        or `http://127.0.0.1:8000` for `make run`'s local runner).

        Requests are SigV4-signed for `execute-api`. The region is `region`, else
        the one in an `execute-api` URL (the API's own, which the signature must
        name), else the session's (`AWS_DEFAULT_REGION` or the profile's `region`;
        botocore does not read `AWS_REGION`). Credentials come from the session's
        standard chain.

        `sign` decides whether requests are signed. None (the default): always,
        except toward a loopback URL (`localhost`, 127.0.0.0/8, `::1`: the local
        runner, which authenticates nobody), where requests go unsigned when no
        region or no credentials are configured. True: always, a loopback URL too.
        False: never (a gateway that authenticates otherwise, a runner on another
        host). A missing region raises `NotConfigured` here, missing credentials at
        the first call; only `sign=False` sends unsigned to a URL that is not loopback.

        `http_session` replaces botocore's `URLLib3Session` (anything with its
        `send(prepared_request)`), e.g. to set proxies or to observe requests.
        """
        session = session or botocore.session.Session()
        if sign is not False:
            region = region or region_of_api(api_url) or _session_region(session, api_url)
        transport = HttpTransport(
            api_url,
            region=region,
            session=session,
            timeout_seconds=timeout_seconds,
            http_session=http_session,
            sign=sign,
        )
        return cls(transport, max_attempts=max_attempts, sleep=sleep)

    @classmethod
    def over_lambda(
        cls,
        function_name: str,
        *,
        region: str | None = None,
        session: botocore.session.Session | None = None,
        lambda_client: Any | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        sleep: Sleep = time.sleep,
    ) -> MemoryClient:
        """A client that invokes the converse-history function (a name, ARN or `name:alias`).

        The region is `region`, else the one in a function ARN (`HistoryAliasArn`),
        else the session's (`AWS_DEFAULT_REGION` or the profile's `region`; botocore
        does not read `AWS_REGION`). With none, or with no credentials, the call
        raises `NotConfigured` (a missing region here, missing credentials at the
        first call).
        `lambda_client` is any botocore Lambda client (with its own config), or a
        stand-in with `invoke(FunctionName=..., Payload=...)`; without one, a client
        is made from the session with botocore's own retries off (this client's
        policy retries instead).
        """
        if lambda_client is not None:
            transport = LambdaTransport(function_name, lambda_client)
        else:
            transport = LambdaTransport.with_a_new_client(
                function_name, region=region, session=session or botocore.session.Session()
            )
        return cls(transport, max_attempts=max_attempts, sleep=sleep)

    def converse(
        self,
        tenant_id: str,
        contact_id: str,
        text: str | None = None,
        *,
        content: list[dict[str, Any]] | None = None,
        message_id: str | None = None,
        sent_at: datetime | None = None,
    ) -> ConverseResult:
        """Record the contact's message (`text`, or Converse `content` blocks) and get the
        decision with the bounded history, ready for Bedrock Converse."""
        message_id = message_id or self._draw_message_id()
        message = _message(message_id, text, content, sent_at)
        answer = self._call(Call("converse", tenant_id, contact_id, {"message": message}))
        return ConverseResult.from_api(answer, message_id)

    def record(
        self,
        tenant_id: str,
        contact_id: str,
        *,
        role: Literal["assistant", "user"],
        text: str | None = None,
        content: list[dict[str, Any]] | None = None,
        message_id: str | None = None,
        sent_at: datetime | None = None,
        usage: dict[str, int] | None = None,
    ) -> RecordedTurn:
        """Record a turn: the agent's reply (`assistant`: text, or content with toolUse
        blocks; `usage` as Bedrock reported it), or the tool results it returns (`user`:
        toolResult blocks only; the contact's own messages go to `converse`)."""
        turn: dict[str, Any] = {
            "role": role,
            **_message(message_id or self._draw_message_id(), text, content, sent_at),
        }
        if usage is not None:
            turn["usage"] = usage
        return RecordedTurn.from_api(self._call(Call("record", tenant_id, contact_id, turn)))

    def memory(self, tenant_id: str, contact_id: str) -> MemoryView:
        """The contact's fold and counters; `NotFound` when nothing was recorded for it."""
        return MemoryView.from_api(self._call(Call("memory", tenant_id, contact_id)))

    @property
    def transport(self) -> Transport:
        """What the client sends with (signed over HTTP, or invoking the Lambda): for tools
        that relay the service's answers as they are, such as the inspector."""
        return self._transport

    def preview(self, tenant_id: str, contact_id: str) -> WindowPreview:
        """The window the contact's next message would get, and where each retained turn
        stands; nothing is recorded or counted. `NotFound` when nothing is stored."""
        return WindowPreview.from_api(self._call(Call("window", tenant_id, contact_id)))

    def recall(
        self, tenant_id: str, contact_id: str, query: str, *, limit: int = DEFAULT_RECALL_LIMIT
    ) -> RecallResult:
        """The contact's retained turns that match `query` by their words, best first, at
        most `limit` (1 to 20) of them, each in its exact words (a long one cut around the
        match); an empty result when none matches. Nothing is recorded or counted, but a
        contact over its rate limit is refused (`RateLimited`), as its next message would be.

        A blank `query` or a `limit` out of range raises `ValueError` here, before
        anything is sent.
        """
        check_recall_request(query, limit)
        body = {"query": query, "limit": limit}
        return RecallResult.from_api(self._call(Call("recall", tenant_id, contact_id, body)))

    def turns(
        self, tenant_id: str, contact_id: str, *, page_size: int = DEFAULT_PAGE_SIZE
    ) -> Iterator[ExportedTurn]:
        """Every turn retained for the contact, oldest first, exactly as recorded
        (untrimmed, unrepaired, tool blocks whole), fetched `page_size` (1 to 500) at a time
        as the iteration goes on.

        A `page_size` out of range raises `ValueError` here, before anything is sent.
        `NotFound` (as from `memory`) when nothing is stored for the contact, raised
        on the first iteration.
        """
        pages = self._pages(Call("turns", tenant_id, contact_id), "turns", page_size)
        return (ExportedTurn.from_api(turn) for turn in pages)

    def contacts(
        self, tenant_id: str, *, page_size: int = DEFAULT_PAGE_SIZE
    ) -> Iterator[ContactSummary]:
        """The tenant's contacts with anything stored, fetched `page_size` (1 to 500) at a
        time as the iteration goes on; a `page_size` out of range raises `ValueError` here."""
        pages = self._pages(Call("contacts", tenant_id), "contacts", page_size)
        return (ContactSummary.from_api(contact) for contact in pages)

    def forget(self, tenant_id: str, contact_id: str) -> Erasure:
        """Erase everything stored for the contact: turns, memory, state, rate-limit records.

        Once this returns, nothing recorded before is served again, and the contact's
        next message starts a new conversation. `complete` is False when the service
        deletes the rest asynchronously; a contact with nothing stored is 0 items.
        """
        answer = self._send(Call("erase", tenant_id, contact_id))
        return Erasure.from_api(dict(answer.body or {}), accepted=answer.status == 202)

    def _pages(self, call: Call, member: str, page_size: int) -> Iterator[dict[str, Any]]:
        """A listing's entries (the pages' `member`), following `nextCursor` until null.

        Not itself a generator, so that `page_size` is checked when the listing is asked
        for; the pages are fetched lazily, by the generator it returns.
        """
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be from 1 to {MAX_PAGE_SIZE}, not {page_size}")

        def entries() -> Iterator[dict[str, Any]]:
            query: dict[str, str | int] = {"limit": page_size}
            while True:
                answer = self._call(replace(call, query=query))
                yield from answer.get(member) or []
                cursor = answer.get("nextCursor")
                if cursor is None:
                    return
                query = {"limit": page_size, "cursor": str(cursor)}

        return entries()

    def _call(self, call: Call) -> dict[str, Any]:
        """The call's answer body, after up to `max_attempts` tries; or the refusal, raised."""
        return dict(self._send(call).body or {})

    def _send(self, call: Call) -> Answer:
        """The call's successful answer, after up to `max_attempts` tries; or the refusal,
        raised."""
        for attempt in range(1, self._max_attempts + 1):
            try:
                answer = self._transport.send(call)
            except TransientFailure as failure:
                if attempt == self._max_attempts:
                    raise ServiceUnavailable(
                        failure.status, failure.code, failure.message
                    ) from failure
                self._back_off(call, attempt, failure.code, retry_after=None)
                continue
            if answer.succeeded:
                return answer
            if not _worth_retrying(answer):
                raise error_for(answer.status, answer.body, answer.retry_after)
            if attempt == self._max_attempts:
                code, message = error_code_and_message(answer.status, answer.body)
                raise ServiceUnavailable(answer.status, code, message)
            self._back_off(call, attempt, f"HTTP {answer.status}", retry_after=answer.retry_after)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _back_off(self, call: Call, attempt: int, why: str, *, retry_after: str | None) -> None:
        """Full jitter: a uniform wait up to a ceiling that doubles with each attempt,
        so clients throttled together do not come back together."""
        ceiling = min(MAX_DELAY_SECONDS, BASE_DELAY_SECONDS * 2 ** (attempt - 1))
        delay = self._jitter() * ceiling
        if retry_after is not None and retry_after.strip().isdigit():
            delay = min(MAX_DELAY_SECONDS, max(delay, float(retry_after.strip())))
        logger.info(
            "conversation-memory %s: %s; retry %d of %d in %.2f s",
            call.action,
            why,
            attempt,
            self._max_attempts - 1,
            delay,
        )
        self._sleep(delay)


def check_recall_request(query: object, limit: object) -> None:
    """Refuse what the service would refuse of a recall, naming the argument: a `query`
    that is not text or is blank, a `limit` that is not a whole number from 1 to 20."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be non-blank text")
    # bool is an int to Python, never to the service's JSON.
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ValueError(f"limit must be a whole number from 1 to {MAX_RECALL_LIMIT}")
    if not 1 <= limit <= MAX_RECALL_LIMIT:
        raise ValueError(f"limit must be from 1 to {MAX_RECALL_LIMIT}, not {limit}")


def _session_region(session: botocore.session.Session, api_url: str) -> str | None:
    """The session's default region (None if it has none); a broken profile raises."""
    try:
        region = session.get_config_variable("region")
    except CONFIGURATION_ERRORS as error:
        raise not_configured(error, f"requests to {api_url.rstrip('/')}") from error
    return str(region) if region else None


def _worth_retrying(answer: Answer) -> bool:
    """A 5xx, or a 429 that is not the service's own `rate_limited` (API Gateway's throttle)."""
    if answer.status >= 500:
        return True
    code, _ = error_code_and_message(answer.status, answer.body)
    return answer.status == 429 and code != "rate_limited"


def _message(
    message_id: str,
    text: str | None,
    content: list[dict[str, Any]] | None,
    sent_at: datetime | None,
) -> dict[str, Any]:
    """A message body: its id, exactly one of text and content, and `sentAt` if given."""
    if (text is None) == (content is None):
        raise ValueError("give exactly one of text and content")
    message: dict[str, Any] = {"id": message_id}
    if text is not None:
        message["text"] = text
    else:
        message["content"] = content
    if sent_at is not None:
        message["sentAt"] = _rfc_3339(sent_at)
    return message


def _rfc_3339(instant: datetime) -> str:
    """In UTC with a `Z`; a naive datetime is refused rather than guessed at."""
    if instant.utcoffset() is None:
        raise ValueError("sent_at must carry a timezone, e.g. datetime.now(UTC)")
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")
