"""A calibration's reliability diagram in headless Chromium (Debian's), offline: the before and after
curves are painted on the chart's canvas from the vendored uPlot, with no script error and no request
leaving the machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from calibration.fitting import calibration_fit_store
from tests.browser import ADMIN_PASSWORD, chromium_page, loopback_only, shot, signed_in
from tests.calibration.test_calibration_admin import labelled_team_answers

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Pixels of the chart's canvas painted in one series' stroke colour (static/openjev/reliability.js).
PAINTED = """([selector, colour]) => {
  const canvas = document.querySelector(`${selector} canvas`);
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  const rgb = [1, 3, 5].map(i => parseInt(colour.slice(i, i + 2), 16));
  let painted = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] > 0 && rgb.every((c, k) => Math.abs(pixels[i + k] - c) <= 12)) painted++;
  }
  return painted;
}"""
BEFORE, AFTER = "#c62828", "#2e7d32"


def test_a_calibration_page_draws_its_reliability_before_and_after_offline(asgi_server: Any, tmp_path: Path) -> None:
    get_user_model().objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)
    calibration = calibration_fit_store(question_key=labelled_team_answers(20), min_labels=20)

    with chromium_page(tmp_path / "chromium-profile") as page:
        blocked = loopback_only(page)
        signed_in(page, base=asgi_server.url, then=f"/admin/evaluations/calibration/{calibration.pk}/change/")
        chart = f"[data-oj-chart='oj-reliability-{calibration.pk}']"
        page.locator(f"{chart} canvas").wait_for()
        assert page.evaluate(PAINTED, [chart, BEFORE]) > 20
        assert page.evaluate(PAINTED, [chart, AFTER]) > 20
        shot(page, "calibration")
        assert page.errors == []
    assert blocked == [], f"the page tried to leave the machine: {blocked}"
