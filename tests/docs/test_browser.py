"""The reference pages in a real browser, offline: headless Debian Chromium with every request that
leaves the loopback interface aborted and recorded (and asserted absent), under the pages'
Content-Security-Policy, with no script or console error (a CSP violation is a console error).

Needs `/usr/bin/chromium` (`apt-get install -y chromium`); playwright never downloads a browser here.
Without it the tests fail (`tests.browser.chromium_require`), unless deselected explicitly with
`-m "not browser"`. Screenshots go to test-artifacts/ (gitignored).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Response, Route, sync_playwright

from api.systemone.examples import REQUEST_EXAMPLES
from serving.config import BASE_DIR
from testbed.live_server import LiveServer
from tests.browser import chromium_require

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = BASE_DIR / "test-artifacts"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
OPERATIONS = [
    "Evaluate typed questions about a state",
    "Decisions: typed answers about an input (OpenAI's Decisions API)",
    "Typed decisions in Google's shape (its clients' default path)",
    "Classify texts with a saved classifier",
    "List the accepted model names",
    "Describe one accepted model name",
    "Readiness: is the backend answering?",
    "Liveness: is the process running?",
    "Admission limits of this deployment",
    "Label a stored answer with the truth",
    "Upload a batch input file",
    "List the key's files",
    "Describe a file",
    "Delete a file",
    "Download a file's content",
    "Create a batch over an uploaded file",
    "List the key's batches",
    "Describe a batch and its progress",
    "Cancel a batch",
]
EXAMPLES = {example.name: example.value for example in REQUEST_EXAMPLES}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_require()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


class OfflineContext:
    """A browser context whose only network is loopback; anything else is aborted and remembered."""

    def __init__(self, browser: Browser) -> None:
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.context: BrowserContext = browser.new_context(
            viewport={"width": 1400, "height": 900}, service_workers="block"
        )
        self.context.route("**/*", self._route)

    def _route(self, route: Route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlsplit(url).hostname in LOOPBACK:
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort("blockedbyclient")

    def page(self) -> Page:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        page.on("response", self._policed)
        return page

    def _policed(self, response: Response) -> None:
        """Every page of the site comes with the Content-Security-Policy that the checks run under."""
        if response.request.resource_type == "document":
            policy = response.headers.get("content-security-policy", "")
            if "script-src 'self'" not in policy or "frame-ancestors 'none'" not in policy:
                self.errors.append(f"{response.url}: no Content-Security-Policy ({policy!r})")


@pytest.fixture
def offline(browser: Browser) -> Iterator[OfflineContext]:
    ARTIFACTS.mkdir(exist_ok=True)
    context = OfflineContext(browser)
    yield context
    context.context.close()
    assert context.blocked == [], f"the page tried to leave the machine: {context.blocked}"
    assert context.errors == [], context.errors


SEND = re.compile(r"^Send\b")
"""The client's Send button: its name starts with it (a response's description may say "send" too)."""


def _send(page: Page, path: str) -> tuple[int, Any, Any]:
    """Click the client's Send button; the request body as sent and the response body."""
    with page.expect_response(lambda r: urlsplit(r.url).path == path and r.request.method == "POST") as info:
        page.get_by_role("button", name=SEND).first.click()
    response = info.value
    return response.status, json.loads(response.request.post_data or "null"), response.json()


def _open_client(page: Page) -> None:
    page.locator("button", has_text="Test Request").filter(has_text="post /v1/systemone").click()
    page.get_by_role("button", name=SEND).first.wait_for()


def _scalar_renders(page: Page, url: str) -> None:
    page.goto(url, wait_until="networkidle")
    for summary in OPERATIONS:
        page.get_by_text(summary).first.wait_for()
    assert page.get_by_text("Ask AI").count() == 0  # Scalar's hosted features stay off
    assert page.get_by_text("Generate SDKs").count() == 0


def test_scalar_reference_renders_offline_and_sends_every_example_and_an_edited_one(
    asgi_server: LiveServer, offline: OfflineContext
) -> None:
    page = offline.page()
    _scalar_renders(page, asgi_server.url + "/")
    page.screenshot(path=ARTIFACTS / "docs-scalar-reference.png")

    _open_client(page)
    page.get_by_role("button", name="Show sidebar").click()
    for name, body in EXAMPLES.items():
        page.get_by_text(name, exact=True).first.click()
        status, sent, answered = _send(page, "/v1/systemone")
        assert status == 200, (name, answered)
        assert sent == body, name
        assert list(answered["answers"]) == list(body["questions"])
        if name == "ReadmeRequest":
            page.get_by_text("200 OK").first.wait_for()
            page.screenshot(path=ARTIFACTS / "docs-scalar-test-request.png")

    edited = {
        "model": "jev-latest",
        "state": "Edited in the browser: is this a question?",
        "questions": {"edited": {"type": "noul", "instructions": "Is the state a question?"}},
    }
    editor = page.locator(".cm-content[contenteditable=true]").first
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(json.dumps(edited))
    status, sent, answered = _send(page, "/v1/systemone")
    assert (status, sent, list(answered["answers"])) == (200, edited, ["edited"])
    page.get_by_text("200 OK").first.wait_for()
    page.screenshot(path=ARTIFACTS / "docs-scalar-edited-request.png")


def test_swagger_ui_renders_offline_and_executes_the_readme_example(
    asgi_server: LiveServer, offline: OfflineContext
) -> None:
    page = offline.page()
    page.goto(asgi_server.url + "/docs", wait_until="networkidle")
    page.locator("#operations-Evaluation-systemone").wait_for()
    assert page.locator(".opblock").count() == len(OPERATIONS)
    page.screenshot(path=ARTIFACTS / "docs-swagger.png")

    page.locator("#operations-Evaluation-systemone .opblock-summary").click()
    with page.expect_response(lambda r: urlsplit(r.url).path == "/v1/systemone") as info:
        page.locator("#operations-Evaluation-systemone").get_by_role("button", name="Execute").click()
    assert info.value.status == 200
    assert json.loads(info.value.request.post_data or "null") == EXAMPLES["ReadmeRequest"]
    operation = page.locator("#operations-Evaluation-systemone")
    status_cell = operation.locator(".live-responses-table tr.response .response-col_status").first
    status_cell.wait_for()
    assert status_cell.inner_text().strip() == "200"
    status_cell.scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "docs-swagger-executed.png", full_page=False)


def test_reference_pages_work_under_a_path_prefix(
    asgi_server: LiveServer, offline: OfflineContext, settings: Any
) -> None:
    """A gateway forwarding /jev/... unchanged, with FORCE_SCRIPT_NAME=/jev: every URL follows the prefix."""
    settings.FORCE_SCRIPT_NAME = "/jev"
    page = offline.page()
    seen: list[str] = []
    page.on("request", lambda request: seen.append(urlsplit(request.url).path))
    _scalar_renders(page, asgi_server.url + "/jev/")
    _open_client(page)
    status, sent, _ = _send(page, "/jev/v1/systemone")
    assert (status, sent) == (200, EXAMPLES["ReadmeRequest"])
    page.get_by_text("200 OK").first.wait_for()
    page.screenshot(path=ARTIFACTS / "docs-scalar-prefixed.png")

    page.goto(asgi_server.url + "/jev/docs", wait_until="networkidle")
    page.locator("#operations-Evaluation-systemone").wait_for()
    assert seen and all(path.startswith("/jev/") for path in seen), seen
