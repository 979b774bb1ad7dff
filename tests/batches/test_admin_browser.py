"""Batches in the admin in a real browser (headless Debian Chromium, offline, under the admin's CSP): the list with
its progress bars moving on their own while a batch runs, cancelling from the list, a finished batch's page with
its downloads (the same bytes as the API's output file), its lines and a line's stored evaluation. Screenshots go
to test-artifacts/."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.keys import apikey_issue
from batches.models import Batch
from testbed.live_server import LiveServer
from tests.batches.conftest import jsonl, line_of, tasks_run
from tests.browser import ADMIN_PASSWORD, chromium_page, loopback_only, shot, signed_in
from tests.database import orm

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REFUSED = {**DECISIONS_REQUEST, "questions": [{"type": "choice", "name": "x", "instructions": "?", "choices": []}]}


def _batch_run(server: LiveServer, *, secret: str) -> dict[str, Any]:
    """A three-line batch through the API, one line its route refuses, run by the task worker to its end."""
    bodies = [DECISIONS_REQUEST, DECISIONS_REQUEST, REFUSED]
    lines = [line_of(custom_id=f"ticket-{i}", url="/v1/decisions", body=body) for i, body in enumerate(bodies)]
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as client:
        uploaded = client.post("/v1/files", files={"file": ("t.jsonl", jsonl(lines))}, data={"purpose": "batch"})
        body = {"input_file_id": uploaded.json()["id"], "endpoint": "/v1/decisions", "completion_window": "24h"}
        batch_id = client.post("/v1/batches", json=body).json()["id"]
        asyncio.run(tasks_run())
        batch: dict[str, Any] = client.get(f"/v1/batches/{batch_id}").json()
        batch["output"] = client.get(f"/v1/files/{batch['output_file_id']}/content").content
    return batch


def _running(*, owner: str) -> Batch:
    now = timezone.now()
    return Batch.objects.create(
        id="batch_0000000000000000running",
        owner=owner,
        endpoint="/v1/decisions",
        input_file_key="file-gone",
        status="in_progress",
        total=20_000,
        completed=7_400,
        failed=100,
        expires_at=now + timedelta(hours=24),
        in_progress_at=now - timedelta(seconds=300),
    )


def test_batches_render_progress_cancel_and_download_in_headless_chromium(
    asgi_server, fake, store, settings, tmp_path: Path
):
    get_user_model().objects.create_superuser("admin", "admin@example.com", ADMIN_PASSWORD)
    key = apikey_issue(name="ticket router", owner="support")
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    finished = _batch_run(asgi_server, secret=key.secret)
    assert finished["status"] == "completed" and finished["request_counts"]["failed"] == 1
    running = _running(owner=key.label)

    base = asgi_server.url
    with chromium_page(tmp_path / "chromium-profile") as page:
        blocked = loopback_only(page)
        signed_in(page, base=base, then="/admin/batches/batch/")
        rows = page.locator("#result_list > tbody > tr")
        assert rows.count() == 2
        row = rows.filter(has_text=running.id)
        assert row.locator(".oj-bar-fill").get_attribute("style") == "width: 38%"
        assert "7,400 · 100 · 20,000" in row.inner_text()
        assert 20 < float(row.locator("td.field-rate").inner_text()) <= 25  # 7,500 lines in 300 s and a moment
        assert f"ticket router ({key.label})" in row.inner_text()
        shot(page, "batches")
        with page.expect_navigation(timeout=20_000):  # a batch runs: the page is read again on its own
            pass

        rows.filter(has_text=running.id).locator("input.action-select").check()
        page.select_option("select[name=action]", "cancel_selected")
        page.get_by_role("button", name="Run").click()
        page.get_by_text("1 batch(es) cancelling").wait_for()
        assert orm(lambda: Batch.objects.get(pk=running.pk).status) == "cancelling"

        page.goto(base + reverse("admin:batches_batch_change", args=[quote(finished["id"])]))
        assert page.locator(".oj-bar-fill").get_attribute("style") == "width: 100%"
        shot(page, "batch")
        with page.expect_download() as download:
            page.get_by_role("link", name="output", exact=True).click()
        assert Path(download.value.path()).read_bytes() == finished["output"]

        page.get_by_role("link", name="its 3 lines").click()
        page.wait_for_url("**/admin/batches/batchitem/?batch=*")
        page.locator("#result_list > tbody > tr").nth(2).wait_for()
        assert page.locator("#result_list > tbody > tr").count() == 3
        shot(page, "batch-lines")
        page.locator("#result_list > tbody > tr", has_text="ticket-0").locator("td.field-evaluation_link a").click()
        page.wait_for_url("**/admin/evaluations/evaluation/*/change/")
        assert page.locator("table.oj-answers > tbody > tr").count() == 3
        assert page.errors == [] and blocked == []
