"""Request edges through the handler: bodies that are not UTF-8, keys given twice, methods,
bodies over 10 MB or of no type, ids with characters no path holds.

Each refusal is 400 (405 for a method, 413 for a size, 415 for a media type)
in the API's error shape, names what is wrong, and writes nothing. Bodies
arrive as API Gateway's HTTP API passes them: text, or bytes base64-encoded.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from local.proxy_events import LambdaContextStandIn, proxy_event
from tests.integration.conftest import Api

TENANT = "/v1/tenants/acme/contacts/c1"
CONVERSE = f"{TENANT}/converse"
TURNS = f"{TENANT}/turns"
MEMORY = f"{TENANT}/memory"
CONTACT = TENANT  # the contact itself: DELETE erases it
CONTACTS = "/v1/tenants/acme/contacts"


def send(
    api: Api,
    method: str,
    path: str,
    body: bytes | str | None = None,
    content_type: str | None = "application/json",
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """Status, headers (`multiValueHeaders` joined) and the JSON answer (None when empty).

    `content_type` None sends none at all; `headers` are sent besides it.
    """
    sent = {
        **({"Content-Type": content_type} if content_type is not None else {}),
        **(headers or {}),
    }
    event = proxy_event(method, path, body, sent, default_content_type=None)
    return answered(api, event)


def answered(api: Api, event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    answer = api.handler.lambda_handler(event, LambdaContextStandIn())
    headers = {str(k): str(v) for k, v in (answer.get("headers") or {}).items()}
    for name, values in (answer.get("multiValueHeaders") or {}).items():
        headers[name] = ", ".join(values)
    raw = answer.get("body") or ""
    return int(answer["statusCode"]), headers, json.loads(raw) if raw else None


def base64_event(path: str, raw: bytes, content_type: str = "application/json") -> dict[str, Any]:
    """A POST as API Gateway passes a body it takes for binary: base64, as sent."""
    event = proxy_event("POST", path, None, {"Content-Type": content_type})
    return {**event, "body": base64.b64encode(raw).decode(), "isBase64Encoded": True}


def refused_as(answer: tuple[int, dict[str, str], Any], start: str) -> None:
    """A 400 `invalid_request` whose message starts with `start`."""
    status, _, body = answer
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    assert body["error"]["message"].startswith(start), body


# -- 1. bodies that are not UTF-8 ----------------------------------------------------

LATIN_1 = '{"message": {"text": "h\u00e9llo"}}'.encode("latin-1")
"""`héllo` in Latin-1: `\\xe9` alone is no UTF-8 (it would become U+FFFD)."""

NOT_UTF_8 = [
    pytest.param(LATIN_1, 0xE9, id="latin-1 e-acute"),
    pytest.param(b'{"message": {"text": "a\xff\xfeb"}}', 0xFF, id="ff fe in a string"),
    pytest.param(b'{"message": {"text": "h\xc3"}}', 0xC3, id="a sequence cut short"),
    pytest.param(b'{"message": {"text": "\xc0\xaf"}}', 0xC0, id="an overlong slash"),
    pytest.param(b'{"message": {"text": "\xed\xa0\x80"}}', 0xED, id="an encoded surrogate"),
    pytest.param(b'{"message": {"text": "\xf4\x90\x80\x80"}}', 0xF4, id="past U+10FFFF"),
    pytest.param(b"\xff\xfe{\x00}\x00", 0xFF, id="UTF-16 with its BOM"),
]


@pytest.mark.parametrize(("raw", "byte"), NOT_UTF_8)
def test_bytes_that_are_not_utf_8_are_refused_naming_the_body(api, raw, byte):
    answer = send(api, "POST", CONVERSE, raw)

    refused_as(answer, f"body: not UTF-8 (byte 0x{byte:02x} at offset {raw.index(byte)})")
    assert api.items() == []


@pytest.mark.parametrize(("raw", "byte"), NOT_UTF_8[:2])
def test_as_api_gateway_passes_them_base64_they_are_refused_too(api, raw, byte):
    event = base64_event(CONVERSE, raw)

    answer = api.handler.lambda_handler(event, LambdaContextStandIn())

    assert answer["statusCode"] == 400
    message = json.loads(answer["body"])["error"]["message"]
    assert message.startswith(f"body: not UTF-8 (byte 0x{byte:02x}")
    assert api.items() == []


def test_a_reply_that_is_not_utf_8_is_refused_too(api):
    raw = '{"role": "assistant", "text": "d\u00e9j\u00e0 vu"}'.encode("cp1252")

    refused_as(send(api, "POST", TURNS, raw), "body: not UTF-8")
    assert api.items() == []


def on_stage(event: dict[str, Any], stage: str) -> dict[str, Any]:
    """The event as a named stage passes it: the stage's name leads `rawPath`."""
    context = {**event["requestContext"], "stage": stage}
    return {**event, "rawPath": f"/{stage}{event['rawPath']}", "requestContext": context}


def test_on_a_named_stage_a_body_is_checked_on_the_path_without_the_stage(api):
    event = proxy_event(
        "POST", CONVERSE, '{"message": {"text": "hi"}}', {"Content-Type": "text/plain"}
    )

    status, _, body = answered(api, on_stage(event, "prod"))

    assert (status, body["error"]["code"]) == (415, "unsupported_media_type")
    assert api.items() == []


def test_on_a_named_stage_the_routes_answer_as_on_the_default_one(api):
    event = proxy_event("POST", CONVERSE, '{"message": {"id": "m1", "text": "hi"}}')

    status, _, body = answered(api, on_stage(event, "prod"))

    assert status == 200, body
    assert body["decision"] == "model"


def test_base64_that_is_not_base64_is_400_not_500(api):
    event = proxy_event("POST", CONVERSE, None)
    event = {**event, "body": "not base64 at all!", "isBase64Encoded": True}

    answer = api.handler.lambda_handler(event, LambdaContextStandIn())

    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"]["message"].startswith("body: ")
    assert api.items() == []


def test_utf_8_bytes_base64_encoded_are_read_and_kept_exactly(api):
    text = "h\u00e9llo \u2014 \U0001f600 \ufffd"  # a client's own U+FFFD is text like any other
    raw = json.dumps({"message": {"text": text}}, ensure_ascii=False).encode()

    answer = api.handler.lambda_handler(base64_event(CONVERSE, raw), LambdaContextStandIn())

    assert answer["statusCode"] == 200, answer["body"]
    assert json.loads(answer["body"])["current"]["content"] == [{"text": text}]


@pytest.mark.parametrize(
    "charset",
    ["latin-1", "ISO-8859-1", "windows-1252", "us-ascii", "utf-16", "utf-8x", "", '"latin-1"'],
)
def test_a_charset_other_than_utf_8_is_refused_naming_the_body(api, charset):
    raw = b'{"message": {"text": "hello"}}'  # the same bytes in every one of them

    answer = send(api, "POST", CONVERSE, raw, f"application/json; charset={charset}")

    refused_as(answer, "body: Content-Type charset")
    assert api.items() == []


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "application/json; charset=UTF-8",
        "application/json;charset=utf8",
        'application/json; charset="utf-8"',
        "Application/JSON; Charset=Utf-8",
        "application/json; version=1",
    ],
)
def test_utf_8_by_any_of_its_spellings_is_accepted(api, content_type):
    raw = '{"message": {"text": "h\u00e9llo"}}'.encode()

    status, _, answer = send(api, "POST", CONVERSE, raw, content_type)

    assert status == 200, answer
    assert answer["current"]["content"] == [{"text": "h\u00e9llo"}]


def test_the_latin_1_body_of_the_issue_is_refused_and_never_stored_as_a_replacement(api):
    answer = send(api, "POST", CONVERSE, LATIN_1, "application/json; charset=latin-1")

    refused_as(answer, "body: ")
    assert api.items() == []


# -- 2. a key given twice ------------------------------------------------------------

DUPLICATES = [
    pytest.param(CONVERSE, '{"message": {"text": "a", "text": "b"}}', "text", id="text"),
    pytest.param(
        CONVERSE,
        '{"message": {"text": "a"}, "message": {"text": "b"}}',
        "message",
        id="top level",
    ),
    pytest.param(
        CONVERSE,
        '{"message": {"text": "a", "t\\u0065xt": "b"}}',
        "text",
        id="the same key escaped",
    ),
    pytest.param(
        CONVERSE,
        '{"message": {"content": [{"text": "hi"}, {"toolResult": {"toolUseId": "t1", '
        '"content": [{"json": {"x": 1, "x": 2}}]}}]}}',
        "x",
        id="in a tool's JSON",
    ),
    pytest.param(TURNS, '{"role": "assistant", "role": "user", "text": "hi"}', "role", id="role"),
    pytest.param(
        TURNS,
        '{"role": "assistant", "content": [{"toolUse": {"toolUseId": "t1", "name": "n", '
        '"input": {"city": "Lyon", "city": "Paris"}}}]}',
        "city",
        id="in a tool's input",
    ),
]


@pytest.mark.parametrize(("path", "raw", "key"), DUPLICATES)
def test_a_key_given_twice_is_refused_naming_the_key(api, path, raw, key):
    json.loads(raw)  # Python's own parser takes it, keeping the last

    answer = send(api, "POST", path, raw)

    refused_as(answer, f"body: not valid JSON (duplicate key {key!r})")
    assert api.items() == []


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"content": [{"text": "a"}, {"text": "b"}]}, id="one key in sibling objects"),
        pytest.param(
            {
                "content": [
                    {"text": "hi"},
                    {"toolResult": {"toolUseId": "t1", "content": [{"json": {"a": 1, "A": 2}}]}},
                ]
            },
            id="keys that differ in case",
        ),
        pytest.param(
            {
                "content": [
                    {"text": "hi"},
                    {"toolResult": {"toolUseId": "t1", "content": [{"json": {"a": {"a": 1}}}]}},
                ]
            },
            id="one key at two depths",
        ),
    ],
)
def test_keys_that_only_look_alike_are_accepted(api, message):
    status, _, answer = send(api, "POST", CONVERSE, json.dumps({"message": message}))

    assert status == 200, answer


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"message": {"text": "hi", "n": NaN}}', "NaN and Infinity are not JSON"),
        ('{"message": {"text": "hi", "n": 1e400}}', "a number is too large"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_the_shared_parser_keeps_its_other_refusals(api, raw, reason):
    refused_as(send(api, "POST", CONVERSE, raw), f"body: not valid JSON ({reason})")


# -- 3. methods ----------------------------------------------------------------------

WRONG_METHODS = [
    *((method, CONVERSE, "POST") for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS")),
    *((method, TURNS, "GET, POST") for method in ("PUT", "DELETE", "PATCH")),
    *((method, CONTACT, "DELETE") for method in ("GET", "POST", "PUT", "PATCH")),
    *((method, CONTACTS, "GET") for method in ("POST", "PUT", "DELETE", "PATCH")),
    *((method, MEMORY, "GET") for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS")),
    *((method, "/health", "GET, HEAD") for method in ("POST", "PUT", "DELETE", "PATCH")),
    ("HEAD", CONVERSE, "POST"),
    ("HEAD", MEMORY, "GET"),
]


@pytest.mark.parametrize(("method", "path", "allow"), WRONG_METHODS)
def test_a_wrong_method_on_a_known_path_is_405_with_allow(api, method, path, allow):
    status, headers, answer = send(api, method, path, '{"message": {"text": "hi"}}')

    assert status == 405, answer
    assert headers["Allow"] == allow
    assert answer["error"]["code"] == "method_not_allowed"
    assert answer["error"]["message"].startswith(f"{method} is not allowed on {path}; use {allow}")
    assert set(answer) == {"error"}
    assert api.items() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nothing"),
        ("DELETE", "/v1/tenants/acme"),
        ("GET", f"{TENANT}/converse/more"),
        ("POST", "/health/deep"),
        ("HEAD", "/"),
        ("POST", "/v1/tenants/acme/contacts//converse"),
    ],
)
def test_an_unknown_path_stays_404(api, method, path):
    status, headers, answer = send(api, method, path, '{"message": {"text": "hi"}}')

    assert status == 404, answer
    assert answer["error"]["code"] == "not_found"
    assert "Allow" not in headers


def test_the_path_decides_before_the_body(api):
    """405 comes before what the body holds: it is not read for a method the path refuses."""
    text_plain = send(api, "POST", "/health", b"hi", "text/plain")
    latin_1 = send(api, "POST", MEMORY, LATIN_1, "application/json; charset=latin-1")

    assert (text_plain[0], latin_1[0]) == (405, 405)
    assert send(api, "POST", "/nothing", LATIN_1)[0] == 404


def test_head_on_health_is_200_without_a_body(api):
    event = proxy_event("HEAD", "/health")

    answer = api.handler.lambda_handler(event, LambdaContextStandIn())

    assert answer["statusCode"] == 200
    assert not answer.get("body")


def test_every_method_allow_names_is_served(api):
    """What `Allow` lists is routed: none of them is answered 404 or 405."""
    api.converse("hello")
    for path, allow in ((CONVERSE, "POST"), (MEMORY, "GET"), ("/health", "GET, HEAD")):
        for method in allow.split(", "):
            body = '{"message": {"text": "again"}}' if method == "POST" else None
            status, _, answer = send(api, method, path, body)
            assert status in (200, 201), (method, path, answer)


# -- 4. blank text (the model's own cases: tests/unit/test_blank_text.py) -------------

ZERO_WIDTH_ONLY = "\u200b\u200c\u200d\u2060\ufeff"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (CONVERSE, {"message": {"text": ZERO_WIDTH_ONLY}}, "message.text"),
        (CONVERSE, {"message": {"text": "\u0000"}}, "message.text"),
        (
            CONVERSE,
            {"message": {"content": [{"text": "\u00a0\u3000\u200b"}]}},
            "message.content.0.TextBlock.text",
        ),
        (TURNS, {"role": "assistant", "text": " \u2028\t\u200b"}, "text"),
        (
            TURNS,
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "\u2060"}]}}],
            },
            "content.0.ToolResultBlock.toolResult.content.0.ToolResultText.text",
        ),
    ],
)
def test_blank_text_is_refused_naming_the_field_and_nothing_is_written(api, path, body, field):
    refused_as(send(api, "POST", path, json.dumps(body)), f"{field}: must not be blank")
    assert api.items() == []


def test_an_emoji_zwj_sequence_is_text(api):
    status, _, answer = send(
        api, "POST", CONVERSE, json.dumps({"message": {"text": "\U0001f469\u200d\U0001f4bb"}})
    )

    assert status == 200, answer
    assert answer["current"]["content"] == [{"text": "\U0001f469\u200d\U0001f4bb"}]


# -- 5. bodies over API Gateway's 10 MB ----------------------------------------------

LIMIT = 10 * 1024 * 1024
HELLO = '{"message": {"text": "hello"}}'


def too_large(answer: tuple[int, dict[str, str], Any], size: int | None) -> None:
    status, headers, body = answer
    assert status == 413, body
    assert headers["Content-Type"] == "application/json"
    assert body["error"]["code"] == "payload_too_large"
    said = f"is {size} bytes" if size is not None else "is over the limit"
    assert body["error"]["message"] == (
        f"the request body {said}; the limit is {LIMIT} bytes (10 MB)"
    )
    assert set(body) == {"error"}


@pytest.mark.parametrize("path", [CONVERSE, TURNS])
@pytest.mark.parametrize(
    ("declared", "size"),
    [
        (str(LIMIT + 1), LIMIT + 1),
        ("1000000000000", 10**12),
        ("000000000000000000000000000000000000010485761", LIMIT + 1),
        ("9" * 5000, None),
    ],
)
def test_a_content_length_over_10_mb_is_413_before_the_body_is_read(api, path, declared, size):
    """The header alone decides: the body that came is small, valid JSON, and never parsed."""
    too_large(send(api, "POST", path, HELLO, headers={"Content-Length": declared}), size)
    assert api.items() == []


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(
            proxy_event("POST", CONVERSE, b'{"message": {"text": "' + b"a" * LIMIT + b'"}}'),
            id="base64, as API Gateway passes application/json",
        ),
        pytest.param(
            proxy_event("POST", CONVERSE, '{"message": {"text": "' + "a" * LIMIT + '"}}'),
            id="text",
        ),
        pytest.param(
            proxy_event(
                "POST", TURNS, '{"role": "assistant", "text": "' + "\u00e9" * (LIMIT // 2) + '"}'
            ),
            id="text of two-byte characters",
        ),
    ],
)
def test_a_body_over_10_mb_is_413_whatever_its_content_length_says(api, event):
    size = (
        len(base64.b64decode(event["body"]))
        if event["isBase64Encoded"]
        else len(event["body"].encode())
    )
    assert size > LIMIT

    too_large(answered(api, event), size)
    assert api.items() == []


def test_a_body_of_exactly_10_mb_is_read_and_refused_for_what_it_says(api):
    """At the limit the body is parsed: this one is a message over the store's item limit."""
    raw = b'{"message": {"text": "' + b"a" * (LIMIT - 25) + b'"}}'
    assert len(raw) == LIMIT

    status, _, answer = send(api, "POST", CONVERSE, raw, headers={"Content-Length": str(LIMIT)})

    assert (status, answer["error"]["code"]) == (413, "message_too_large"), answer
    assert api.items() == []


def test_the_size_comes_before_the_media_type_and_the_path_before_the_size(api):
    """As API Gateway: the size is checked before anything the body holds; 405 before both."""
    oversized = {"Content-Length": str(LIMIT + 1)}

    assert send(api, "POST", CONVERSE, "x", "text/plain", headers=oversized)[0] == 413
    assert send(api, "POST", CONVERSE, "x", None, headers=oversized)[0] == 413
    assert send(api, "POST", MEMORY, "x", None, headers=oversized)[0] == 405


# -- 6. a body without a Content-Type ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CONVERSE, HELLO),
        (TURNS, '{"role": "assistant", "text": "hi"}'),
        (CONVERSE, ""),
        (CONVERSE, b'{"message": {"text": "hello"}}'),
    ],
)
@pytest.mark.parametrize("content_type", [None, "", "  "])
def test_a_post_without_a_content_type_is_415_as_one_of_another_type(api, path, body, content_type):
    status, headers, answer = send(api, "POST", path, body, content_type)

    assert status == 415, answer
    assert headers["Content-Type"] == "application/json"
    assert answer == {
        "error": {
            "code": "unsupported_media_type",
            "message": "Content-Type: missing; the body must be application/json",
        }
    }
    assert api.items() == []


def test_a_wrong_content_type_is_415_naming_it_as_before(api):
    status, _, answer = send(api, "POST", CONVERSE, HELLO, "text/plain")

    assert (status, answer["error"]["code"]) == (415, "unsupported_media_type")
    assert (
        answer["error"]["message"]
        == "Content-Type: 'text/plain'; the body must be application/json"
    )


def test_a_get_needs_no_content_type(api):
    api.converse("hello")

    for path in (MEMORY, "/health", "/openapi.json"):
        status, _, answer = send(api, "GET", path, None, None)
        assert status == 200, (path, answer)


def test_a_request_without_a_body_refused_for_its_method_stays_405(api):
    status, headers, _ = send(api, "DELETE", CONVERSE, None, None)

    assert (status, headers["Allow"]) == (405, "POST")


# -- 7. ids with characters no path holds ---------------------------------------------

CONTROL_AND_OTHERS = [
    "a\u0001b",
    "\u0000",
    "a\u001fb",
    "a\u007fb",
    "a\u0085b",
    'a"b',
    "a\\b",
    "a`b",
    "a b",
    "a\u00a0b",
    "\u20ac",
    "caf\u00e9",
    "a\ud800b",
]
"""Raw in the event's path: what Powertools' routes would not match (a 404) and what they would."""


@pytest.mark.parametrize("contact", CONTROL_AND_OTHERS)
@pytest.mark.parametrize(
    ("method", "route"), [("POST", "converse"), ("POST", "turns"), ("GET", "memory")]
)
def test_a_character_no_path_holds_in_the_contact_is_400_naming_it(api, contact, method, route):
    body = HELLO if route == "converse" else '{"role": "assistant", "text": "hi"}'
    status, _, answer = send(
        api,
        method,
        f"/v1/tenants/acme/contacts/{contact}/{route}",
        body if method == "POST" else None,
    )

    assert status == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith("contactId: "), answer
    assert api.items() == []


@pytest.mark.parametrize("tenant", ["a\u0001b", "acme\u0000", "a\\b", "\u00e9"])
def test_a_character_no_path_holds_in_the_tenant_is_400_naming_it(api, tenant):
    status, _, answer = send(api, "POST", f"/v1/tenants/{tenant}/contacts/c1/converse", HELLO)

    assert status == 400, answer
    assert answer["error"]["message"].startswith("tenantId: "), answer
    assert api.items() == []


@pytest.mark.parametrize(
    "encoded", ["a%01b", "a%00b", "a%7Fb", "a%20b", "a%2Fb", "caf%C3%A9", "a%FFb"]
)
def test_percent_encoded_the_same_characters_are_400_naming_the_contact(api, encoded):
    status, _, answer = send(api, "POST", f"/v1/tenants/acme/contacts/{encoded}/converse", HELLO)

    assert status == 400, answer
    assert answer["error"]["message"].startswith("contactId: "), answer


def test_a_wrong_method_on_a_path_with_a_control_character_is_405_as_its_encoded_form(api):
    for path in (
        "/v1/tenants/acme/contacts/a\u0001b/converse",
        "/v1/tenants/acme/contacts/a%01b/converse",
    ):
        status, headers, _ = send(api, "GET", path)
        assert (status, headers["Allow"]) == (405, "POST"), path


def test_what_no_route_has_stays_404_with_a_control_character(api):
    status, _, answer = send(api, "GET", "/nothing\u0001here")

    assert status == 404
    assert answer["error"]["code"] == "not_found"


def test_an_id_of_id_characters_only_is_served_whether_encoded_or_not(api):
    for contact in ("alice@example.com", "alice%40example.com", "+33612345678", "%2B33612345678"):
        status, _, answer = send(
            api, "POST", f"/v1/tenants/acme/contacts/{contact}/converse", HELLO
        )
        assert status == 200, (contact, answer)


# -- 8. the same ids in a direct invocation -----------------------------------------


@pytest.mark.parametrize("action", ["converse", "record", "memory"])
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("contactId", "a\u0001b"),
        ("contactId", "a\u0000"),
        ("contactId", "a\u007fb"),
        ("contactId", "a b"),
        ("contactId", "a/b"),
        ("contactId", "a%01b"),
        ("contactId", "caf\u00e9"),
        ("contactId", "c1\n"),
        ("tenantId", "a\u0001b"),
        ("tenantId", "acme\n"),
        ("tenantId", "ac.me"),
    ],
)
def test_a_direct_invocation_refuses_the_same_ids_naming_the_field(api, action, field, value):
    event: dict[str, Any] = {"action": action, "tenantId": "acme", "contactId": "c1", field: value}
    if action == "converse":
        event["message"] = {"text": "hi"}
    if action == "record":
        event.update(role="assistant", text="hi")

    answer = api.handler.lambda_handler(event, LambdaContextStandIn())

    assert answer["statusCode"] == 400, answer
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["message"].startswith(f"{field}: must match "), answer
    assert api.items() == []
