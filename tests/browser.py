"""Headless Debian Chromium for the page tests: a fresh profile per test, screenshots kept under
`test-artifacts/`, requests that would leave the machine blocked, and signing in to the admin."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from serving.config import BASE_DIR

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = BASE_DIR / "test-artifacts"


def chromium_require() -> str:
    """Debian's Chromium, or the test fails: a browser check that did not run is a defect, never a quiet skip.
    Without Chromium, run the rest by deselecting the browser tests explicitly: `-m "not browser"`."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: apt-get update && apt-get install -y chromium, "
            "or deselect the browser tests explicitly (pytest -m 'not browser')"
        )
    return CHROMIUM


@contextmanager
def chromium_page(profile: Path) -> Iterator[Any]:
    """A page in Debian's Chromium with a fresh profile. Playwright's sync API runs an event loop in this
    thread while it is open, so ORM calls inside the block go through `orm` (a worker thread)."""
    executable = chromium_require()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # A persistent context is how Playwright takes a fresh --user-data-dir of our choosing.
        context = playwright.chromium.launch_persistent_context(
            user_data_dir=str(profile),
            executable_path=executable,
            headless=True,
            args=["--headless", *CHROMIUM_ARGS],
            viewport={"width": 1600, "height": 1000},
        )
        page = context.pages[0] if context.pages else context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # Console errors too: a Content-Security-Policy violation is reported there, not as a script error.
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        setattr(page, "errors", errors)  # noqa: B010 - the tests read the page's script and console errors from it
        try:
            yield page
        finally:
            context.close()


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"admin-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000
    return path


ADMIN_PASSWORD = "correct horse battery"


def loopback_only(page: Any) -> list[str]:
    """Abort every request of the page that would leave the machine; the returned list collects their URLs
    (a test asserts it stays empty: the admin works offline)."""
    from playwright.sync_api import Route

    from tests.docs.test_browser import LOOPBACK

    blocked: list[str] = []

    def route(route: Route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlsplit(url).hostname in LOOPBACK:
            route.continue_()
        else:
            blocked.append(url)
            route.abort("blockedbyclient")

    page.context.route("**/*", route)
    return blocked


def sign_in_attempt(page: Any, *, base: str, then: str, username: str, password: str) -> int:
    """Submit the login form; the status of the page it answers with."""
    page.goto(f"{base}/admin/login/?next={then}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    with page.expect_response(lambda r: r.request.method == "POST" and "/admin/login/" in r.url) as answered:
        page.click("input[type=submit]")
    page.wait_for_load_state()
    return int(answered.value.status)


def signed_in(page: Any, *, base: str, then: str, username: str = "admin") -> None:
    """Sign in as the superuser `username` through the login form, landing on `then`."""
    assert sign_in_attempt(page, base=base, then=then, username=username, password=ADMIN_PASSWORD) == 302
    page.wait_for_url(f"**{then}")
