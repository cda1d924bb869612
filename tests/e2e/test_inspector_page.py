"""The inspector's page in a real headless Chromium, over `make run`'s runner (issue #30).

One conversation is built through the API so that every standing the operator
looks for is there: replies folded into the memory and out of the window, a
long message trimmed, turns older than the tenant's `historyDays`, and the
newest turns in the window. The page must show each turn's standing as the
`/window` preview gives it, the memory, the exact Converse fragment with its
cache points, and a usage chart; and it must ask nothing of any host but the
runner's. The screenshot is docs/inspector.png.

Debian's Chromium (`/usr/bin/chromium`, which `make test` installs), driven by
Playwright without a browser download of its own.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

from inspector.server import InspectorServer, signed_transport
from tests.e2e.runner_process import REPO_ROOT, Runner
from tests.support.no_aws_configuration import clear_aws_configuration

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}, and `make test` could not install it "
    "(apt-get install chromium): the inspector's page is not tested in a browser",
)
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = REPO_ROOT / "docs" / "inspector.png"
PAGE_TIMEOUT_MS = 30_000
FOLD_WAIT_SECONDS = 60

TENANT = "demo"  # the example rules: historyDays 30, no rate limit, a turn cap of 25
FOLDED_PAIRS = 8
# 1,500 letters estimate at about 305 tokens: eight pairs pass MEMORY_FOLD_MIN_TOKENS (2,000)
# and the window's budget (HISTORY_WINDOW_MAX_TOKENS, 4,000), so the oldest leave the window.
PAIR_TEXT_LETTERS = 1500
# About 1,220 tokens: over HISTORY_MESSAGE_MAX_TOKENS (1,000), so trimmed in the history.
LONG_TEXT_LETTERS = 6000
OUT_OF_RANGE_DAYS = 40  # past the tenant's historyDays (30), within the turns' 60-day life

CALL_ID = "call:weather-1"


def label_of(standing: dict[str, Any]) -> str:
    """The words the page must show for a standing: readable without its colour."""
    kind = standing["standing"]
    if kind == "trimmed":
        return f"trimmed — {standing['omittedTokens']:,} tokens omitted"
    return {
        "window": "in the window",
        "folded": "folded into the memory",
        "out_of_range": "outside the history range",
        "held_by_neither": "held by neither",
    }[kind]


def usage(n: int) -> dict[str, int]:
    """A reply's usage as Bedrock reports it: the cache warms as the conversation goes on."""
    cache_read = 0 if n == 0 else 400 + 300 * n
    cache_write = 350 if n % 4 == 0 else 0
    return {
        "inputTokens": 180 + 25 * n,
        "outputTokens": 60 + n,
        "totalTokens": 180 + 25 * n + 60 + n + cache_read + cache_write,
        "cacheReadInputTokens": cache_read,
        "cacheWriteInputTokens": cache_write,
    }


def _instant(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Conversation:
    runner: Runner
    contact: str
    long_text: str
    out_of_range_ids: tuple[str, ...]

    @property
    def path(self) -> str:
        return f"/v1/tenants/{TENANT}/contacts/{quote(self.contact, safe='')}"

    @property
    def page_url(self) -> str:
        return f"{self.runner.base_url}/inspect/tenants/{TENANT}/contacts/{self.contact}"

    def get(self, tail: str) -> Any:
        status, _, body = self.runner.request("GET", self.path + tail)
        assert status == 200, (tail, body)
        return body

    def turns(self) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = []
        query = "?limit=100"
        while True:
            page = self.get("/turns" + query)
            turns += page["turns"]
            if page["nextCursor"] is None:
                return turns
            query = f"?limit=100&cursor={quote(page['nextCursor'], safe='')}"


def _say(runner: Runner, contact: str, text: str) -> None:
    status, answer = runner.converse(TENANT, contact, text)
    assert status == 200, answer
    assert answer["decision"] == "model", answer


def _record(runner: Runner, contact: str, turn: dict[str, Any]) -> str:
    status, _, answer = runner.request(
        "POST", f"/v1/tenants/{TENANT}/contacts/{contact}/turns", turn
    )
    assert status == 201, answer
    return str(answer["turn"]["id"])


def _wait_for_the_folds(runner: Runner, contact: str) -> None:
    """Until a memory is there and no compaction is in flight: the folds have settled."""
    deadline = time.monotonic() + FOLD_WAIT_SECONDS
    while time.monotonic() < deadline:
        status, _, body = runner.request("GET", f"/v1/tenants/{TENANT}/contacts/{contact}/memory")
        assert status == 200, body
        if body["memory"] and not body["counters"]["compactionInFlight"]:
            return
        time.sleep(0.25)
    pytest.fail(f"the conversation was not folded within {FOLD_WAIT_SECONDS} s")


@pytest.fixture(scope="module")
def conversation(shared_runner: Runner) -> Conversation:
    runner = shared_runner
    contact = f"inspect-{uuid.uuid4().hex[:10]}"
    replies = 0

    def reply(turn: dict[str, Any], *, measured: bool = True) -> str:
        nonlocal replies
        if measured:
            turn = {**turn, "usage": usage(replies)}
        replies += 1
        return _record(runner, contact, {"role": "assistant", **turn})

    # Long enough to be folded, and for the oldest to leave the window.
    for n in range(FOLDED_PAIRS):
        _say(runner, contact, f"Question {n} about the lease. " + "q" * PAIR_TEXT_LETTERS)
        reply({"text": f"Answer {n} on the lease. " + "a" * PAIR_TEXT_LETTERS})

    # A long message the window holds trimmed.
    long_text = "A very long message: the whole contract, pasted. " + "x" * LONG_TEXT_LETTERS
    _say(runner, contact, long_text)
    reply({"text": "Thank you, I have read the contract."})

    # The newest exchange, with a tool call and its result.
    _say(runner, contact, "And what is the weather in Paris?")
    reply(
        {
            "content": [
                {"text": "Let me look that up."},
                {
                    "toolUse": {
                        "toolUseId": CALL_ID,
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                },
            ]
        },
        measured=False,  # a reply without usage is shown as such on the chart
    )
    _record(
        runner,
        contact,
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": CALL_ID,
                        "content": [{"json": {"tempC": 21, "sky": "clear"}}],
                        "status": "success",
                    }
                }
            ],
        },
    )
    reply({"text": "It is 21 °C and clear in Paris."})
    _wait_for_the_folds(runner, contact)

    # Replies dated past the history range, filed after the folds: late, so no memory holds
    # them, and no converse call follows to fold them.
    old = datetime.now(UTC) - timedelta(days=OUT_OF_RANGE_DAYS)
    out_of_range = tuple(
        reply(
            {"text": f"An old reply, {OUT_OF_RANGE_DAYS} days ago ({n}).", "sentAt": _instant(at)}
        )
        for n, at in enumerate([old, old + timedelta(minutes=1)])
    )

    return Conversation(runner, contact, long_text, out_of_range)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def requests_made(browser: BrowserContext) -> Iterator[list[str]]:
    """Every request any page of the browser makes while the test runs."""
    made: list[str] = []

    def record(request: Any) -> None:
        made.append(request.url)

    browser.on("request", record)
    try:
        yield made
    finally:
        browser.remove_listener("request", record)


def _open(browser: BrowserContext, url: str) -> Page:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_load_state("networkidle")
    assert errors == [], errors
    return page


def _assert_only_the_runner_was_asked(made: list[str], runner: Runner) -> None:
    assert made, "the page made no request at all"
    elsewhere = [
        url
        for url in made
        if not url.startswith("data:")
        and (urlsplit(url).hostname, urlsplit(url).port) != ("127.0.0.1", runner.port)
    ]
    assert elsewhere == []


def test_the_conversation_page_shows_what_the_model_saw(
    conversation: Conversation, browser: BrowserContext, requests_made: list[str]
):
    preview = conversation.get("/window")
    turns = conversation.turns()
    standings = preview["standings"]
    long_message_id = next(
        turn["id"] for turn in turns if turn["content"] == [{"text": conversation.long_text}]
    )
    # The conversation holds what the operator looks for, where the test put it.
    assert {"window", "trimmed", "folded", "out_of_range"} <= {
        standing["standing"] for standing in standings.values()
    }
    assert standings[long_message_id]["standing"] == "trimmed"
    for turn_id in conversation.out_of_range_ids:
        assert standings[turn_id]["standing"] == "out_of_range"
    assert preview["memory"] is not None

    page = _open(browser, conversation.page_url)
    try:
        page.locator("#turn-list li.turn").first.wait_for()
        shown = page.eval_on_selector_all(
            "#turn-list li.turn",
            "items => items.map(item => [item.dataset.turnId, item.dataset.standing, "
            "item.querySelector('.standing-text').textContent])",
        )
        # Every turn, in order, with its standing in words as the preview gives it.
        assert [turn_id for turn_id, _, _ in shown] == [turn["id"] for turn in turns]
        for turn_id, standing, label in shown:
            assert standing == standings[turn_id]["standing"], turn_id
            assert label == label_of(standings[turn_id]), turn_id
        trimmed = standings[long_message_id]
        assert trimmed["omittedTokens"] > 0
        assert label_of(trimmed).startswith("trimmed — ")

        # The memory: its summary, version and count.
        memory = page.locator("#memory")
        assert preview["memory"]["summary"] in memory.inner_text()
        assert f"{preview['memory']['turnsFolded']:,}" in memory.inner_text()

        # The fragment, exactly (the cache points' marks add no text to it), each cache
        # point marked.
        fragment = page.locator("#fragment")
        assert json.loads(fragment.text_content() or "") == {
            "system": preview["converse"]["system"],
            "messages": preview["converse"]["messages"],
        }
        cache_points = json.dumps(preview["converse"]).count('"cachePoint"')
        assert cache_points >= 1
        assert fragment.locator("mark.cache-point").count() == cache_points

        # The window figures and the counts.
        figures = page.locator("#figures").inner_text()
        assert f"{preview['window']['estimatedTokens']:,}" in figures
        assert "folded into the memory" in figures

        # The chart: a bar segment per usage figure, a point per measured reply, its axes.
        measured = [t for t in turns if t["role"] == "assistant" and t.get("usage")]
        chart = page.locator("#usage-chart")
        assert chart.locator("circle.prompt-point").count() == len(measured)
        assert chart.locator("rect.bar").count() >= len(measured)
        assert chart.locator("polyline.prompt-line").count() >= 1
        assert {"tokens", "reply, oldest first"} <= set(chart.locator("text").all_text_contents())

        page.screenshot(path=str(SCREENSHOT), full_page=True)
    finally:
        page.close()
    _assert_only_the_runner_was_asked(requests_made, conversation.runner)


def test_from_the_tenants_to_a_conversation(
    conversation: Conversation, browser: BrowserContext, requests_made: list[str]
):
    runner = conversation.runner
    page = _open(browser, f"{runner.base_url}/inspect")
    try:
        tenants = page.locator("#tenant-list a").all_text_contents()
        assert tenants == ["acme-legal", "campus-advisers", "demo"]  # rules.example.json

        page.locator("#tenant-list a", has_text=TENANT).click()
        page.wait_for_url(re.compile(rf".*/inspect\?tenant={TENANT}$"))
        page.locator("#contact-rows tr").first.wait_for()
        page.fill("#contact-input", conversation.contact)
        page.click("#contact-form button[type=submit]")
        page.wait_for_url(f"**/inspect/tenants/{TENANT}/contacts/{conversation.contact}")
        page.locator("#turn-list li.turn").first.wait_for()
        heading = page.locator("#conversation-heading").inner_text()
        assert heading.startswith(f"Conversation of {conversation.contact}")
    finally:
        page.close()
    _assert_only_the_runner_was_asked(requests_made, runner)


def test_the_same_page_through_the_server_for_a_deployed_stack(
    conversation: Conversation,
    browser: BrowserContext,
    requests_made: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
):
    """`python -m inspector --api-url URL` in front of the runner, as in front of a stack:
    the page reads through it (no AWS configuration here, so unsigned toward loopback)."""
    clear_aws_configuration(monkeypatch, tmp_path)
    server = InspectorServer(("127.0.0.1", 0), signed_transport(conversation.runner.base_url))
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        preview = conversation.get("/window")
        page = _open(
            browser, f"{server.url}/inspect/tenants/{TENANT}/contacts/{conversation.contact}"
        )
        try:
            page.locator("#turn-list li.turn").first.wait_for()
            shown = page.eval_on_selector_all(
                "#turn-list li.turn", "items => items.map(item => item.dataset.standing)"
            )
            assert sorted(shown) == sorted(s["standing"] for s in preview["standings"].values())
            assert preview["memory"]["summary"] in page.locator("#memory").inner_text()
        finally:
            page.close()
        tenants_page = _open(browser, f"{server.url}/inspect")
        try:
            assert tenants_page.locator("#no-tenant-list").is_visible()
            assert tenants_page.locator("#tenant-input").is_visible()
        finally:
            tenants_page.close()
    finally:
        server.shutdown()
        server.server_close()
        serving.join()
    server_port = server.server_address[1]
    assert {urlsplit(url).port for url in requests_made if not url.startswith("data:")} == {
        server_port
    }


def test_an_unknown_contact_is_said_so(conversation: Conversation, browser: BrowserContext):
    runner = conversation.runner
    page = _open(browser, f"{runner.base_url}/inspect/tenants/{TENANT}/contacts/nobody-here")
    try:
        status = page.locator("#status")
        status.filter(has_text="404").wait_for()
        assert "not_found" in status.inner_text()
        assert page.locator("#conversation-view").is_hidden()
    finally:
        page.close()
