"""The fast tier's guard, loaded by `scripts/test.sh --fast` (`-p tests.tiers`): there the embedded model
cannot be loaded and no browser can start, so a test that needs either but lacks its `embedded` or
`browser` marker fails with this message instead of quietly making the edit-test loop slow."""

from __future__ import annotations

from typing import Any, NoReturn

import pytest


def _refusal(*, needs: str, marker: str) -> Any:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError(
            f"this test {needs} but is not marked @pytest.mark.{marker}: mark it, so that "
            "`make test-fast` leaves it to `make test`"
        )

    return refuse


def pytest_configure(config: pytest.Config) -> None:
    import playwright.async_api
    import playwright.sync_api

    from inference.backends.llamacpp import LlamaCppBackend

    LlamaCppBackend.__init__ = _refusal(needs="loads the embedded model", marker="embedded")  # type: ignore[method-assign]
    browser = _refusal(needs="starts a browser", marker="browser")
    playwright.sync_api.sync_playwright = browser
    playwright.async_api.async_playwright = browser
