"""The dashboard's live charts in headless Chromium (Debian's), offline: every request that leaves the loopback
interface is aborted and fails the test. The charts draw the stored hour, then move with a new evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model

from audit.storage.writer import writer_drain
from tests.browser import ADMIN_PASSWORD, chromium_page, loopback_only, shot, signed_in
from tests.conftest import README_REQUEST

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Pixels of a chart's canvas painted in its data series' colour (not axes or grid), and how many of its
# plotted values are positive numbers.
DRAWN = """([id, colour]) => {
  const canvas = document.querySelector(`#${id} canvas`);
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  const rgb = [1, 3, 5].map(i => parseInt(colour.slice(i, i + 2), 16));
  let drawn = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] > 0 && rgb.every((c, k) => Math.abs(pixels[i + k] - c) <= 12)) drawn++;
  }
  const values = window.ojLive.charts[id].data.slice(1).flat().filter(v => v !== null && v > 0).length;
  return [drawn, values];
}"""
SERIES = {
    "oj-chart-rate": "#1565c0",
    "oj-chart-latency": "#1565c0",
    "oj-chart-status": "#2e7d32",
    "oj-chart-mass": "#5d4037",
}


def test_the_live_dashboard_draws_the_last_hour_offline_and_moves_with_each_evaluation(
    asgi_server: Any, fake: Any, store: Any, tmp_path: Path
) -> None:
    get_user_model().objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)
    with httpx.Client(base_url=asgi_server.url) as client:
        for body in (
            README_REQUEST,
            {**README_REQUEST, "state": "Thanks, all sorted!"},
            {**README_REQUEST, "model": "gpt-4"},
        ):
            client.post("/v1/systemone", json=body)
    assert writer_drain(timeout=30)

    with chromium_page(tmp_path / "chromium-profile") as page:
        blocked = loopback_only(page)
        signed_in(page, base=asgi_server.url, then="/admin/evaluations/evaluation/dashboard/")
        page.locator("#oj-live-state[data-state=live]").wait_for()
        # Predicates as functions: Playwright evals a bare expression in the page, which the page's CSP refuses.
        page.wait_for_function("() => document.getElementById('oj-live-total').textContent === '3'")
        for chart, colour in SERIES.items():
            drawn, values = page.evaluate(DRAWN, [chart, colour])
            assert drawn > 20 and values > 0, (chart, drawn, values)
        assert page.locator("#oj-live-answered").inner_text() == "66.7 %"
        shot(page, "dashboard-live")

        with httpx.Client(base_url=asgi_server.url) as client:
            assert client.post("/v1/systemone", json=README_REQUEST).status_code == 200
        page.wait_for_function(
            "() => window.ojLive.ticks > 0 && document.getElementById('oj-live-total').textContent === '4'"
        )
        page.wait_for_function("() => document.getElementById('oj-live-generations').textContent !== '—'")
        drawn, values = page.evaluate(DRAWN, ["oj-chart-generations", "#00838f"])
        assert drawn > 20 and values > 0  # generations are counted live only: these are the new evaluation's
        shot(page, "dashboard-live-tick")
        assert page.errors == []
    assert blocked == [], f"the page tried to leave the machine: {blocked}"
