"""One API key's usage page in headless Chromium (Debian's), offline: the 30-day chart is drawn from this
server's own uPlot, under the admin's Content-Security-Policy, and shows today's evaluations."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model

from audit.keys import apikey_issue
from audit.storage.writer import writer_drain
from tests.browser import ADMIN_PASSWORD, chromium_page, loopback_only, shot, signed_in
from tests.conftest import README_REQUEST

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Pixels of the chart's canvas in the evaluations series' colour, and the chart's last plotted value.
DRAWN = """() => {
  const canvas = document.querySelector("#oj-usage-chart canvas");
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let drawn = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] > 200 && Math.abs(pixels[i] - 0x15) < 14 && Math.abs(pixels[i + 1] - 0x65) < 14
        && Math.abs(pixels[i + 2] - 0xc0) < 14) drawn++;
  }
  return drawn;
}"""


def test_a_keys_usage_chart_draws_its_30_days_offline(
    asgi_server: Any, fake: Any, store: Any, settings: Any, tmp_path: Path
) -> None:
    get_user_model().objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)
    key = apikey_issue(name="charted")
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    with httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Bearer {key.secret}"}) as client:
        for _ in range(3):
            assert client.post("/v1/systemone", json=README_REQUEST).status_code == 200
    assert writer_drain(timeout=30)

    with chromium_page(tmp_path / "chromium-profile") as page:
        blocked = loopback_only(page)
        signed_in(page, base=asgi_server.url, then=f"/admin/evaluations/apikey/{key.id}/usage/")
        page.locator("#oj-usage-chart canvas").first.wait_for()
        shot(page, "key-usage")
        assert page.evaluate(DRAWN) > 20
        assert page.locator("table.oj-usage tbody tr").count() == 31  # the total, then 30 days
        assert page.locator("table.oj-usage tbody tr").nth(1).locator("td").nth(1).inner_text() == "3"
        assert page.errors == []
    assert blocked == [], f"the page tried to leave the machine: {blocked}"
