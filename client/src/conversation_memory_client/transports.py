"""The two ways to reach the service: its HTTP API (SigV4-signed) or its Lambda, invoked.

Each transport sends one `Call` once and gives back the service's `Answer`
(its status and JSON body), refusals included: deciding what to retry and
what to raise is the client's. What never reached an answer (a connection
that failed, Lambda's own throttling) is raised as `TransientFailure`; a call
that could not be made for want of a region or credentials raises
`NotConfigured` (`configuration.py` says what botocore reads).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import quote, urlencode, urlsplit

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError, NoCredentialsError
from botocore.exceptions import ConnectionError as BotocoreConnectionError
from botocore.httpsession import URLLib3Session

from conversation_memory_client.configuration import (
    CONFIGURATION_ERRORS,
    is_loopback,
    no_credentials,
    no_region,
    not_configured,
)

logger = logging.getLogger(__name__)

Action = Literal["converse", "record", "memory", "window", "recall", "turns", "contacts", "erase"]

_ROUTES: dict[Action, tuple[str, str]] = {
    "converse": ("POST", "contacts/{contact}/converse"),
    "record": ("POST", "contacts/{contact}/turns"),
    "memory": ("GET", "contacts/{contact}/memory"),
    "window": ("GET", "contacts/{contact}/window"),
    "recall": ("POST", "contacts/{contact}/recall"),
    "turns": ("GET", "contacts/{contact}/turns"),
    "contacts": ("GET", "contacts"),
    "erase": ("DELETE", "contacts/{contact}"),
}
"""Each action's method and path under `/v1/tenants/{t}/`; `{contact}` is the contact's id."""

_TENANT_WIDE: frozenset[Action] = frozenset({"contacts"})
"""The actions on a tenant rather than on one of its contacts: they take no contact id."""

_LAMBDA_THROTTLING = frozenset(
    {"TooManyRequestsException", "ServiceException", "EC2ThrottledException"}
)
"""Lambda's errors that say "not now" rather than "never": the invocation may succeed later."""

_CONNECTION_ERRORS = (BotocoreConnectionError, HTTPClientError)
"""botocore's failures to connect, send or read (a read timeout included)."""


@dataclass(frozen=True)
class Call:
    """One operation: the action, the conversation (or, for `contacts`, the tenant alone),
    the API's JSON body, and its query parameters.

    `body` is what `POST .../converse`, `POST .../turns` or `POST .../recall` takes over
    HTTP: `{"message": {...}}`, the turn itself, or `{"query", "limit"}`; None for the
    other actions.
    `query` holds a listing's `limit` and `cursor` (None or absent: the service's
    defaults); over Lambda they are members of the event, as the body's are.
    """

    action: Action
    tenant_id: str
    contact_id: str | None = None
    body: dict[str, Any] | None = None
    query: Mapping[str, str | int] | None = None

    def __post_init__(self) -> None:
        if (self.contact_id is None) != (self.action in _TENANT_WIDE):
            wanted = "takes no contact id" if self.action in _TENANT_WIDE else "needs a contact id"
            raise ValueError(f"the {self.action!r} action {wanted}")


@dataclass(frozen=True)
class Answer:
    """The service's answer: HTTP status (or the payload's `statusCode`) and JSON body.

    `retry_after` is the `Retry-After` header, where the transport has headers.
    """

    status: int
    body: Any
    retry_after: str | None = None

    @property
    def succeeded(self) -> bool:
        """A 2xx answer."""
        return 200 <= self.status < 300


class TransientFailure(Exception):
    """No answer this time (connection failure, Lambda throttling); a retry may get one.

    `status` and `code` describe it for `ServiceUnavailable` once retries run out:
    Lambda's own status and error code, or 503 `connection_failed`.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Transport(Protocol):
    """Sends a call once; answers the service's status and body, or raises TransientFailure."""

    def send(self, call: Call) -> Answer:
        """One attempt: the service's answer, or TransientFailure when there was none."""
        ...


class HttpTransport:
    """The API over HTTP(S): each request signed with SigV4 for `execute-api`, or unsigned.

    Credentials come from the session's standard chain (environment, profile, an
    assumed role, the instance or task role), read once and refreshed by botocore
    as they expire; each attempt is signed anew, so a retry carries a fresh date.

    `sign=True` signs every request and needs a region and credentials (else
    `NotConfigured`); `sign=False` signs none. `sign=None` signs too, except toward a
    loopback URL (`make run`'s runner, which authenticates nobody): there, with no
    region or no credentials configured, requests go unsigned, and the transport says
    so once in its log. Any other URL is never sent unsigned unless `sign=False`.
    """

    def __init__(
        self,
        api_url: str,
        *,
        region: str | None,
        session: botocore.session.Session,
        timeout_seconds: float,
        http_session: Any | None = None,
        sign: bool | None = None,
    ) -> None:
        self._api_url = api_url.rstrip("/")
        self._target = f"requests to {self._api_url}"
        self._region = region
        self._session = session
        self._credentials: Any | None = None
        self._lock = threading.Lock()
        if sign is None and not is_loopback(api_url):
            sign = True
        if sign and not region:
            raise no_region(self._target)
        self._sign = sign
        if sign is None and not region:
            self._go_unsigned("no AWS region is configured")
        # botocore's own HTTP stack: what its clients use, so no other HTTP library is needed.
        self._http = http_session or URLLib3Session(timeout=timeout_seconds)

    def send(self, call: Call) -> Answer:
        """The call as an HTTP request, SigV4-signed afresh for this attempt (or unsigned)."""
        url = self._url(call)
        method = _ROUTES[call.action][0]
        headers = {"Accept": "application/json"}
        data = None
        if call.body is not None:
            data = json.dumps(call.body, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        # The query is in the URL, not AWSRequest's `params`: signed exactly as it is sent.
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        credentials = self._signing_credentials()
        if credentials is not None:
            SigV4Auth(credentials, "execute-api", self._region).add_auth(request)
        try:
            response = self._http.send(request.prepare())
        except _CONNECTION_ERRORS as error:
            raise TransientFailure(503, "connection_failed", str(error)) from error
        return Answer(
            status=int(response.status_code),
            body=_json_or_none(response.content),
            retry_after=response.headers.get("Retry-After"),
        )

    def _url(self, call: Call) -> str:
        """The call's URL: ids percent-encoded as single path segments, and the query
        encoded as SigV4 canonicalizes it (RFC 3986: `%20`, never `+`), so the signature
        made over this URL is the one the gateway computes from the decoded parameters."""
        path = _ROUTES[call.action][1].format(contact=quote(call.contact_id or "", safe=""))
        url = f"{self._api_url}/v1/tenants/{quote(call.tenant_id, safe='')}/{path}"
        if call.query:
            url += "?" + urlencode({k: str(v) for k, v in call.query.items()}, quote_via=quote)
        return url

    def _signing_credentials(self) -> Any | None:
        """This attempt's credentials (one consistent key, secret and token, refreshed as
        due), or None to send it unsigned."""
        try:
            with self._lock:
                if self._sign is False:
                    return None
                if self._credentials is None:
                    self._credentials = self._session.get_credentials()
                if self._credentials is None:
                    if self._sign:
                        raise no_credentials(self._target) from NoCredentialsError()
                    self._go_unsigned("no AWS credentials are configured")
                    return None
            return self._credentials.get_frozen_credentials()
        except (*CONFIGURATION_ERRORS, ClientError) as error:
            # A ClientError here is STS refusing to refresh an assumed role's credentials.
            raise not_configured(error, self._target) from error

    def _go_unsigned(self, why: str) -> None:
        """Loopback only, with sign=None: from now on, every request goes unsigned."""
        self._sign = False
        logger.info(
            "conversation-memory: sending unsigned requests to %s, a loopback URL: %s "
            "(pass sign=True to require signing)",
            self._api_url,
            why,
        )


class LambdaTransport:
    """The converse-history Lambda invoked directly with its direct protocol.

    `{"action": ..., "tenantId", "contactId", ...}` (no `contactId` for `contacts`),
    with the body's members and a listing's `limit` and `cursor`; a refusal comes back as
    the API's error body with its `statusCode`. The Lambda client's own retries
    are turned off where this transport makes the client, so the client's
    policy alone decides how often a call is tried.
    """

    def __init__(self, function_name: str, lambda_client: Any) -> None:
        self._function_name = function_name
        self._lambda = lambda_client

    @classmethod
    def with_a_new_client(
        cls, function_name: str, *, region: str | None, session: botocore.session.Session
    ) -> LambdaTransport:
        """A Lambda client from the session, with botocore's own retries off.

        The region is `region`, else the one in a function ARN, else the session's.
        """
        config = Config(retries={"total_max_attempts": 1})
        try:
            lambda_client = session.create_client(
                "lambda",
                region_name=region or region_of_function(function_name),
                config=config,
            )
        except CONFIGURATION_ERRORS as error:
            raise not_configured(error, f"invoking {function_name}") from error
        return cls(function_name, lambda_client)

    def send(self, call: Call) -> Answer:
        """The call as one `invoke` in the direct protocol; a refusal read like HTTP's."""
        event: dict[str, Any] = {"action": call.action, "tenantId": call.tenant_id}
        if call.contact_id is not None:
            event["contactId"] = call.contact_id
        event.update(call.body or {})
        event.update(call.query or {})
        try:
            response = self._lambda.invoke(
                FunctionName=self._function_name,
                Payload=json.dumps(event, separators=(",", ":")).encode("utf-8"),
            )
        except CONFIGURATION_ERRORS as error:
            raise not_configured(error, f"invoking {self._function_name}") from error
        except ClientError as error:
            details = error.response.get("Error", {})
            code = str(details.get("Code", ""))
            status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if code in _LAMBDA_THROTTLING or status >= 500:
                raise TransientFailure(
                    status or 503, code, str(details.get("Message", error))
                ) from error
            raise  # the function's name, permissions or configuration: not the service's answer
        except _CONNECTION_ERRORS as error:
            raise TransientFailure(503, "connection_failed", str(error)) from error
        payload = _json_or_none(response["Payload"].read())
        if response.get("FunctionError"):
            # The function failed unhandled (or timed out): the HTTP API answers this 500.
            message = payload.get("errorMessage") if isinstance(payload, Mapping) else None
            return Answer(500, {"error": {"code": "function_error", "message": str(message)}})
        if isinstance(payload, Mapping) and "error" in payload and "statusCode" in payload:
            return Answer(int(payload["statusCode"]), payload)
        return Answer(200, payload)


def region_of_api(api_url: str) -> str | None:
    """The region in an API Gateway URL (`https://{id}.execute-api.{region}.amazonaws.com/...`)."""
    labels = (urlsplit(api_url).hostname or "").split(".")
    if len(labels) >= 4 and labels[1] == "execute-api":
        return labels[2]
    return None


def region_of_function(function_name: str) -> str | None:
    """The region in a function ARN (`arn:aws:lambda:{region}:{account}:function:{name}`)."""
    parts = function_name.split(":")
    if len(parts) >= 7 and parts[0] == "arn" and parts[2] == "lambda" and parts[3]:
        return parts[3]
    return None


def _json_or_none(content: bytes) -> Any:
    """The body's JSON; None for an empty body or one that is not JSON (a proxy's HTML page)."""
    try:
        return json.loads(content) if content else None
    except ValueError:
        return None
