"""The documented multipart upload in a real browser: Swagger UI's form for `POST /v1/files` (a file picker and the
purpose) uploads a batch input file as `files.create` does, offline, on the test database. Needs Debian's Chromium
(`tests.browser`); the screenshot goes to test-artifacts/."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from api.systemone.examples import README_REQUEST
from batches.models import FileLine
from testbed.live_server import LiveServer
from tests.browser import ARTIFACTS, chromium_page, loopback_only
from tests.database import orm

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_swagger_ui_uploads_a_batch_file_through_its_form(asgi_server: LiveServer, tmp_path: Any) -> None:
    lines = tmp_path / "tickets.jsonl"
    line = {"custom_id": "t-1", "method": "POST", "url": "/v1/systemone", "body": README_REQUEST}
    lines.write_text(json.dumps(line) + "\n")
    with chromium_page(tmp_path / "chromium-profile") as page:
        blocked = loopback_only(page)
        page.goto(asgi_server.url + "/docs", wait_until="networkidle")
        operation = page.locator("#operations-Files-createFile")
        operation.locator(".opblock-summary").click()
        operation.locator("input[type=file]").set_input_files(str(lines))
        operation.locator("tr[data-property-name=purpose] select").select_option("batch")
        with page.expect_response(lambda r: urlsplit(r.url).path == "/v1/files") as info:
            operation.get_by_role("button", name="Execute").click()
        assert info.value.status == 200, info.value.text()
        stored = info.value.json()
        status = operation.locator(".live-responses-table tr.response .response-col_status").first
        status.wait_for()
        assert status.inner_text().strip() == "200"
        status.scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "docs-swagger-upload.png"))
        assert page.errors == [] and blocked == []
    assert (stored["object"], stored["filename"], stored["bytes"]) == ("file", "tickets.jsonl", lines.stat().st_size)
    texts = orm(lambda: list(FileLine.objects.filter(file_id=stored["id"]).values_list("text", flat=True)))
    assert [json.loads(text) for text in texts] == [line]
