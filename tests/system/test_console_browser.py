"""The console in a real browser: Debian's headless Chromium, driven by Playwright, against a
functions-framework server on the embedded backend (A2A_CONSOLE=true, A2A_AUTH=api-key).

Chat with the streamed answer, an input-required round trip, the tasks list with its filters
and pages, a task's timeline, a cancel from it, hostile agent text and file parts, and the
page's policy and console. Each view's screenshot is written under build/console/.
Playwright never downloads a browser here: Chromium comes from Debian (`make install`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Request,
    Route,
    expect,
    sync_playwright,
)

from emulator._process import EmulatorError
from emulator.browser import find_chromium
from shared.bindings.console import CSP
from shared.identity.api_key import hashed
from tests.conftest import ROOT, Server
from tests.handlers.console import _HOSTILE_EXAMPLE as HOSTILE_EXAMPLE
from tests.identity.issuer import serve as serve_issuer

KEY = "console-browser-test-key-0123456789"
SHOTS = ROOT / "build" / "console"
WAIT_MS = 10_000  # the longest any step may take before the test fails


def chromium() -> str:
    """Debian's chromium, or a failure that says how to get it (never a skip)."""
    try:
        return find_chromium()
    except EmulatorError as missing:
        pytest.fail(str(missing))


@pytest.fixture(scope="module")
def agent() -> Iterator[Server]:
    server = Server(
        {
            "A2A_HANDLER": "tests.handlers.console",
            "A2A_CONSOLE": "true",
            "A2A_AUTH": "api-key",
            "A2A_API_KEYS": f"tester:{hashed(KEY)}",
            # Streams end after a second, as they do at a function's time limit: the console
            # must follow a longer task by subscribing again.
            "A2A_STREAM_SECONDS": "1",
        }
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--disable-background-networking", "--disable-component-update"],
        )
        yield launched
        launched.close()


class Console:
    """One browser tab on the console, with what its JavaScript console and requests said."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.url = url
        self.problems: list[str] = []
        self.methods: list[str] = []  # of the JSON-RPC requests, in order
        self.authorizations: list[str | None] = []  # their Authorization headers
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("request", self._request)
        page.set_default_timeout(WAIT_MS)
        expect.set_options(timeout=WAIT_MS)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"{message.type}: {message.text}")

    def _request(self, request: Request) -> None:
        if request.method == "POST" and request.post_data:
            self.methods.append(json.loads(request.post_data)["method"])
            self.authorizations.append(request.headers.get("authorization"))

    def open(self, key: str | None = KEY) -> Any:
        response = self.page.goto(f"{self.url}/console/")
        expect(self.page.locator("body")).to_have_attribute("data-ready", "true")
        if key is not None:
            self.page.fill("#credential", key)
            self.page.click("#credentials button[type=submit]")
        return response

    def send(self, text: str) -> None:
        self.page.fill("#message", text)
        self.page.click("#send")

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


@pytest.fixture
def console(browser: Browser, agent: Server) -> Iterator[Console]:
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    yield Console(context.new_page(), agent.url)
    context.close()


def rpc(agent: Server, method: str, params: dict[str, Any]) -> Any:
    headers = {"A2A-Version": "1.0", "X-API-Key": KEY}
    answer = agent.rpc({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers)
    assert "result" in answer, answer
    return answer["result"]


def chat_ids(console: Console) -> tuple[str, str]:
    """The chat's context and task ids, as the page shows them."""
    ids = console.page.locator("#chat-ids").inner_text()
    found = re.fullmatch(r"context (\S+) · task (\S+)", ids)
    assert found, ids
    return found.group(1), found.group(2)


def chat_task_id(console: Console) -> str:
    return chat_ids(console)[1]


def test_chat_streams_the_answer(console: Console) -> None:
    response = console.open()
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    expect(console.page.locator("#agent-name")).to_have_text("a2a-functions sample agent")

    console.send("hello from the browser")

    state = console.page.locator("#chat-state")
    expect(state).to_have_text("Completed")
    # In words for a person; the wire name stays in the attribute and the tooltip.
    expect(state).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    expect(state).to_have_attribute("title", "TASK_STATE_COMPLETED")
    expect(console.page.locator("#transcript .artifact")).to_contain_text("hello from the browser")
    assert console.methods == ["SendStreamingMessage"]
    console.shot("chat")

    # The next message is a new task in the same conversation; a new one starts afresh.
    first_context, first_task = chat_ids(console)
    console.send("tell me a joke")
    expect(console.page.locator("#transcript")).to_contain_text("chicken")
    context, task = chat_ids(console)
    assert (context, task != first_task) == (first_context, True)
    console.page.click("#new-chat")
    expect(console.page.locator("#transcript li")).to_have_count(0)
    console.send("hello again")
    expect(console.page.locator("#chat-state")).to_have_text("Completed")
    assert chat_ids(console)[0] not in (first_context, "")
    assert console.problems == []


def test_an_empty_chat_offers_the_cards_examples(console: Console, agent: Server) -> None:
    card = requests.get(f"{agent.url}/.well-known/agent-card.json", timeout=5).json()
    examples = [e for skill in card["skills"] for e in skill.get("examples", [])]
    assert "tell me a joke" in examples and HOSTILE_EXAMPLE in examples
    console.open()
    offered = console.page.locator("#example-list button")
    expect(offered).to_have_text(examples)  # each once, in the card's order, as text
    assert console.page.locator("#examples img").count() == 0
    expect(offered.filter(has_text="tell me a joke")).to_have_attribute("title", "Joke")
    console.shot("chat-examples")

    # A click puts the example in the message box, to edit or send: it sends nothing.
    offered.filter(has_text="tell me a joke").click()
    expect(console.page.locator("#message")).to_have_value("tell me a joke")
    expect(console.page.locator("#message")).to_be_focused()
    assert console.methods == []
    console.page.click("#send")
    expect(console.page.locator("#transcript")).to_contain_text("chicken")
    expect(console.page.locator("#examples")).to_be_hidden()  # the chat is no longer empty

    console.page.click("#new-chat")
    expect(console.page.locator("#examples")).to_be_visible()
    offered.filter(has_text="window.__xss").click()
    expect(console.page.locator("#message")).to_have_value(HOSTILE_EXAMPLE)
    assert console.page.evaluate("window.__xss") is None
    assert console.problems == []


def test_the_examples_offered_are_bounded_and_only_text(console: Console) -> None:
    """A card of any shape: skills or examples that are not lists, examples that are not
    text or are blank, repeats, and more than the chat shows (12)."""

    def odd_card(route: Route) -> None:
        card = route.fetch().json()
        card["skills"] = [
            None,
            {"name": "not a list", "examples": "tell me a joke"},
            {"examples": [42, None, {"text": "x"}, "   ", "first", "first"]},
            {"name": "many", "examples": [f"example {n}" for n in range(30)]},
        ]
        route.fulfill(json=card)

    console.page.route("**/.well-known/agent-card.json", odd_card)
    console.open()
    offered = console.page.locator("#example-list button")
    expect(offered).to_have_text(["first", *(f"example {n}" for n in range(11))])
    expect(offered.first).not_to_have_attribute("title", re.compile("."))
    assert console.problems == []


def test_an_input_required_task_takes_the_answer(console: Console) -> None:
    console.open()
    console.send("I need a new phone")
    expect(console.page.locator("#chat-state")).to_have_text("Needs your input")
    expect(console.page.locator("#transcript")).to_contain_text("Select a phone type")
    asked = chat_task_id(console)

    console.send("Android, please")

    expect(console.page.locator("#chat-state")).to_have_text("Completed")
    expect(console.page.locator("#transcript")).to_contain_text("ordered a new Android device")
    assert chat_task_id(console) == asked, "the answer went to the waiting task"
    console.shot("chat-input-required")
    assert console.problems == []


def test_tasks_list_filters_pages_and_opens_a_timeline(console: Console, agent: Server) -> None:
    context = "console-paging-" + KEY[-6:]
    for number in range(12):
        rpc(
            agent,
            "SendMessage",
            {
                "message": {
                    "messageId": f"{context}-{number}",
                    "role": "ROLE_USER",
                    "contextId": context,
                    "parts": [{"text": f"note {number}"}],
                }
            },
        )
    console.open()
    console.page.click("#nav-tasks")
    console.page.fill("#filter-context", context)
    console.page.select_option("#filter-size", "10")
    console.page.click("#task-filters button[type=submit]")
    rows = console.page.locator("#task-rows tr")
    expect(rows).to_have_count(10)
    expect(console.page.locator("#page-info")).to_have_text("page 1 of 12 tasks")
    console.shot("tasks")
    console.page.click("#page-next")
    expect(rows).to_have_count(2)
    expect(console.page.locator("#page-next")).to_be_disabled()
    console.page.click("#page-prev")
    expect(rows).to_have_count(10)
    console.page.select_option("#filter-state", "TASK_STATE_CANCELED")
    console.page.click("#task-filters button[type=submit]")
    expect(rows).to_have_text(["No tasks match."])

    console.page.select_option("#filter-state", "")
    console.page.click("#task-filters button[type=submit]")
    expect(rows.first.locator(".state")).to_have_text("Completed")
    # Nowhere a person reads a state (badges, the filter) is it a wire name.
    assert "TASK_STATE_" not in console.page.locator("main").inner_text()
    filter_words = console.page.locator("#filter-state option").all_inner_texts()
    assert filter_words[:3] == ["any", "Submitted", "Working"], filter_words
    console.page.locator("#task-rows a").first.click()
    expect(console.page.locator("#task-state")).to_have_text("Completed")
    timeline = console.page.locator("#timeline")
    expect(timeline.locator("li.user")).to_contain_text(re.compile(r"note \d+"))
    expect(timeline.locator("li.status .who")).to_contain_text("Completed · ")
    assert "TASK_STATE_" not in console.page.locator("main").inner_text()
    expect(console.page.locator("#artifacts .artifact")).to_contain_text(re.compile(r"note \d+"))

    # Push configs: add one, see it, delete it; a refused URL says why.
    console.page.fill("#push-url", "https://hooks.example.com/a2a")
    console.page.fill("#push-token", "s3cret")
    console.page.click("#push-form button[type=submit]")
    expect(console.page.locator("#push-rows tr:not(.empty)")).to_have_count(1)
    expect(console.page.locator("#push-rows")).to_contain_text("https://hooks.example.com/a2a")
    console.shot("timeline")
    console.page.click("#push-rows button")
    expect(console.page.locator("#push-rows")).to_have_text("No push configs: add a webhook below.")
    expect(console.page.locator("#push-rows tr:not(.empty)")).to_have_count(0)
    console.page.fill("#push-url", "http://169.254.169.254/latest")
    console.page.click("#push-form button[type=submit]")
    expect(console.page.locator("#error")).to_contain_text("A2A_PUSH_ALLOWED_HOSTS")
    expect(console.page.locator("#push-rows tr:not(.empty)")).to_have_count(0)
    assert console.problems == []


def test_a_running_task_is_canceled_from_its_timeline(console: Console) -> None:
    console.open()
    console.send("slow steps=400 delay=0.05")
    expect(console.page.locator("#transcript li.progress")).to_contain_text("step")
    task_id = chat_task_id(console)

    console.page.goto(f"{console.url}/console/#task/{task_id}")
    expect(console.page.locator("body")).to_have_attribute("data-ready", "true")
    expect(console.page.locator("#task-state")).to_have_text("Working")
    # The timeline follows the task: its status changes arrive while it works.
    expect(console.page.locator("#timeline li.status").nth(1)).to_contain_text("step")
    console.shot("timeline-working")
    console.page.click("#task-cancel")

    expect(console.page.locator("#task-state")).to_have_text("Canceled")
    expect(console.page.locator("#task-cancel")).to_be_hidden()
    console.shot("timeline-canceled")
    assert "CancelTask" in console.methods
    assert console.problems == []


def test_chat_and_timeline_follow_a_task_past_the_end_of_a_stream(console: Console) -> None:
    console.open()
    console.send("slow steps=30 delay=0.05")  # 1.5 s of work: longer than one stream
    progress = console.page.locator("#transcript li.progress")
    expect(progress).to_contain_text("step")
    expect(console.page.locator("#chat-state")).to_have_text("Completed")
    expect(console.page.locator("#transcript .artifact")).to_contain_text("done")
    # The task is done: its last progress line, which says it is at work, is gone.
    expect(progress).to_have_count(0)
    assert console.methods[:2] == ["SendStreamingMessage", "SubscribeToTask"]

    first = chat_task_id(console)
    console.send("slow steps=50 delay=0.05")  # 2.5 s: the timeline opens at most 2 streams
    expect(console.page.locator("#chat-state")).to_have_text("Working")
    task_id = chat_task_id(console)
    assert task_id != first, "a new task in the same conversation"
    del console.methods[:]
    console.page.goto(f"{console.url}/console/#task/{task_id}")  # the chat's stream goes
    expect(console.page.locator("#task-state")).to_have_text("Completed")
    expect(console.page.locator("#artifacts")).to_contain_text("done")
    assert console.methods.count("SubscribeToTask") >= 2, console.methods
    assert console.problems == []


def test_agent_text_and_file_parts_are_never_markup(console: Console, agent: Server) -> None:
    hostile = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    console.open()
    console.send(hostile)
    expect(console.page.locator("#chat-state")).to_have_text("Completed")
    expect(console.page.locator("#transcript .artifact")).to_contain_text(hostile)
    assert console.page.locator("#transcript img, #transcript script").count() == 0
    assert console.page.evaluate("window.__xss") is None

    # A file part whose URL is a script and whose name is markup: shown as text, no link.
    task = rpc(
        agent,
        "SendMessage",
        {
            "message": {
                "messageId": "console-hostile-file",
                "role": "ROLE_USER",
                "parts": [
                    {"url": "javascript:window.__xss=3", "filename": hostile},
                    {"raw": "PHNjcmlwdD4=", "filename": "x.html", "mediaType": "text/html"},
                ],
            }
        },
    )["task"]
    console.page.goto(f"{console.url}/console/#task/{task['id']}")
    expect(console.page.locator("#task-state")).to_have_text("Completed")
    timeline = console.page.locator("#timeline")
    # What the agent made of them: text, never markup.
    expect(console.page.locator("#artifacts")).to_contain_text("by URL")
    expect(timeline).to_contain_text("javascript:window.__xss=3")
    assert timeline.locator("a[href^='javascript']").count() == 0
    assert console.page.locator("main img, main script").count() == 0
    # The raw file is a download, typed as bytes: it never renders as a page of the agent.
    download = timeline.locator("a.download")
    expect(download).to_have_attribute("download", "x.html")
    assert console.page.evaluate("window.__xss") is None
    console.shot("hostile")
    assert console.problems == []


def test_data_parts_render_as_pretty_json(console: Console, agent: Server) -> None:
    data = {"order": {"items": [1, 2]}, "note": "<b>not bold</b>"}
    task = rpc(
        agent,
        "SendMessage",
        {"message": {"messageId": "console-data", "role": "ROLE_USER", "parts": [{"data": data}]}},
    )["task"]
    console.open()
    console.page.goto(f"{console.url}/console/#task/{task['id']}")
    pretty = json.dumps(data, indent=2)
    expect(console.page.locator("#timeline li.user pre.data")).to_have_text(pretty)
    # The echo: the message's data parts, as a list.
    expect(console.page.locator("#artifacts pre.data")).to_have_text(json.dumps([data], indent=2))
    assert console.page.locator("main b").count() == 0
    assert console.problems == []


# A 1x1 PNG, and an SVG that would run a script if it were ever a document of the page.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
SVG = base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__xss=4"/>'
).decode()


def test_raster_images_are_shown_and_svg_is_only_a_download(
    console: Console, agent: Server
) -> None:
    parts = [
        {"raw": PNG, "filename": "dot.png", "mediaType": "image/png"},
        {"raw": SVG, "filename": "x.svg", "mediaType": "image/svg+xml"},
    ]
    message = {"messageId": "console-images", "role": "ROLE_USER", "parts": parts}
    task = rpc(agent, "SendMessage", {"message": message})["task"]
    console.open()
    console.page.goto(f"{console.url}/console/#task/{task['id']}")
    preview = console.page.locator("#timeline img.preview")
    expect(preview).to_have_count(1)
    expect(preview).to_have_attribute("alt", "dot.png")
    assert (
        console.page.evaluate("document.querySelector('#timeline img.preview').naturalWidth") == 1
    )
    expect(console.page.locator("#timeline a.download")).to_have_count(2)
    assert console.page.evaluate("window.__xss") is None
    assert console.problems == []


def test_without_the_key_the_console_says_what_to_send(console: Console) -> None:
    console.open(key=None)
    expect(console.page.locator("#credential-label")).to_have_text("API key")
    console.send("hello")
    expect(console.page.locator("#error")).to_contain_text(
        "enter an API key above (sent in X-API-Key)"
    )
    # The browser logs the 401 itself; nothing else went wrong.
    assert [p for p in console.problems if "401" not in p] == []
    console.page.fill("#credential", KEY)
    console.page.click("#credentials button[type=submit]")
    expect(console.page.locator("#error")).to_be_hidden()
    console.send("hello again")
    expect(console.page.locator("#chat-state")).to_have_text("Completed")


def test_a_bearer_token_is_sent_as_the_card_says_and_scopes_what_is_seen(
    browser: Browser,
) -> None:
    """A2A_AUTH=oidc: the console asks for a bearer token, sends it in Authorization, and
    each token's owner sees only its own tasks."""
    for issuer in serve_issuer():
        server = Server(
            {
                "A2A_HANDLER": "tests.handlers.console",
                "A2A_CONSOLE": "true",
                "A2A_AUTH": "oidc",
                "A2A_OIDC_ISSUER": issuer.url,
                "A2A_OIDC_AUDIENCE": "agent",
            }
        )
        context = browser.new_context()
        try:
            console = Console(context.new_page(), server.url)
            alice = issuer.token(aud="agent", sub="alice")
            console.open(key=alice)
            expect(console.page.locator("#credential-label")).to_have_text("Bearer token")
            console.send("hello from alice")
            expect(console.page.locator("#chat-state")).to_have_text("Completed")
            assert set(console.authorizations) == {f"Bearer {alice}"}
            console.page.click("#nav-tasks")
            expect(console.page.locator("#task-rows a")).to_have_count(1)

            console.open(key=issuer.token(aud="agent", sub="bob"))
            console.page.click("#nav-tasks")
            expect(console.page.locator("#task-rows")).to_have_text("No tasks match.")
            assert console.problems == []
        finally:
            context.close()
            server.stop()


def test_every_console_answer_carries_the_policy_over_the_real_server(agent: Server) -> None:
    """Through gunicorn too; an encoded climb out of /console finds nothing."""
    for name in ("console.js", "console.css", "%2e%2e/settings.py"):
        response = requests.get(f"{agent.url}/console/{name}", timeout=5)
        assert response.headers["Content-Security-Policy"] == CSP
    assert response.status_code == 404
