"""Batches in the admin: each batch's progress (bar, counts, lines a second, time left), its owner key and status;
cancelling and the downloads, the same as the API's; its lines linked to their stored evaluations; and every page
and link behind the view permission of what it shows, cancelling behind the change permission."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.keys import apikey_issue
from audit.models import Evaluation
from batches.models import Batch, BatchItem
from batches.progress import batch_progress, duration_text
from testbed.live_server import LiveServer
from tests.batches.conftest import batch_create, file_upload, jsonl, line_of, tasks_run
from tests.database import db

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BATCHES = "/admin/batches/batch/"
ITEMS = "/admin/batches/batchitem/"
REFUSED = {**DECISIONS_REQUEST, "questions": [{"type": "choice", "name": "x", "instructions": "?", "choices": []}]}


_ids = itertools.count()


def _user(name: str, *perms: str, superuser: bool = False) -> Any:
    """A staff user holding exactly `perms` (`app_label.codename`), or a superuser."""
    model = get_user_model()
    if superuser:
        return model.objects.create_superuser(name, f"{name}@example.com", "x")
    user = model.objects.create_user(name, password="x", is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


def _download(batch: Batch, kind: str) -> str:
    return reverse("admin:batches_batch_download", args=[quote(batch.pk), kind])


def _signed_in(name: str, *perms: str, superuser: bool = False) -> Client:
    client = Client()
    client.force_login(_user(name, *perms, superuser=superuser))
    return client


def _batch(
    *, status: str = "in_progress", total: int = 1000, done: tuple[int, int] = (450, 50), **fields: Any
) -> Batch:
    now = timezone.now()
    completed, failed = done
    return Batch.objects.create(
        id=f"batch_{next(_ids):024d}",
        owner=fields.pop("owner", ""),
        endpoint="/v1/decisions",
        input_file_key="file-gone",
        status=status,
        total=total,
        completed=completed,
        failed=failed,
        expires_at=now + timedelta(hours=24),
        **{"in_progress_at": now - timedelta(seconds=100), **fields},
    )


def test_a_running_batch_shows_its_progress_rate_and_time_left():
    batch = _batch()
    assert batch.in_progress_at is not None
    progress = batch_progress(batch=batch, now=batch.in_progress_at + timedelta(seconds=100))
    assert (progress.fraction, round(progress.rate or 0, 2), duration_text(progress.eta)) == (0.5, 5.0, "1m 40s")
    page = _signed_in("admin", superuser=True).get(BATCHES).content.decode()
    row = page[page.index(batch.id) :]
    assert 'style="width: 50%"' in row and "450 · 50 · 1,000" in row
    assert "oj-running" in row and "in progress" in row
    assert "5.0" in row or "4.9" in row  # lines a second since its work started (a moment has passed)
    assert "1m 4" in row  # about 100 s left at that pace


def test_an_ended_batch_has_no_time_left_and_its_rate_is_over_its_run():
    now = timezone.now()
    batch = _batch(status="completed", done=(1000, 0), finalizing_at=now - timedelta(seconds=50), ended_at=now)
    progress = batch_progress(batch=batch, now=now + timedelta(hours=1))
    assert (progress.fraction, round(progress.rate or 0, 3), progress.eta) == (1.0, 20.0, None)
    assert batch_progress(batch=_batch(status="validating", total=5, done=(0, 0), in_progress_at=None)).rate is None


def test_staff_need_the_view_permission_to_see_batches_and_the_change_permission_to_cancel():
    running, ended = _batch(), _batch(status="completed", done=(1000, 0))
    assert _signed_in("nobody").get(BATCHES).status_code == 403
    viewer = _signed_in("viewer", "batches.view_batch")
    listed = viewer.get(BATCHES)
    assert listed.status_code == 200 and running.id in listed.content.decode()
    assert "cancel_selected" not in listed.content.decode()
    refused = viewer.post(BATCHES, {"action": "cancel_selected", "_selected_action": [running.pk]})
    assert refused.status_code == 302 and Batch.objects.get(pk=running.pk).status == "in_progress"

    operator = _signed_in("operator", "batches.view_batch", "batches.change_batch")
    assert "cancel_selected" in operator.get(BATCHES).content.decode()
    done = operator.post(BATCHES, {"action": "cancel_selected", "_selected_action": [running.pk, ended.pk]})
    assert done.status_code == 302
    assert Batch.objects.get(pk=running.pk).status == "cancelling"
    assert Batch.objects.get(pk=ended.pk).status == "completed"  # an ended batch is left as it is
    messages = operator.get(BATCHES).content.decode()
    assert "1 batch(es) cancelling" in messages and "1 had ended already" in messages


def test_nobody_adds_edits_or_deletes_a_batch_here():
    batch = _batch()
    admin = _signed_in("admin", superuser=True)
    assert admin.get(f"{BATCHES}add/").status_code == 403
    assert admin.get(reverse("admin:batches_batch_delete", args=[quote(batch.pk)])).status_code == 403
    page = admin.get(reverse("admin:batches_batch_change", args=[quote(batch.pk)])).content.decode()
    assert "delete_selected" not in admin.get(BATCHES).content.decode()
    assert 'name="_save"' not in page and 'name="_continue"' not in page
    assert "Validation errors" not in page and "oj-progress" in page  # errors shown for a batch that has them


def test_the_download_action_takes_one_batch_and_needs_the_view_permission():
    first, second = _batch(), _batch(status="completed", done=(1000, 0))
    viewer = _signed_in("viewer", "batches.view_batch")
    one = viewer.post(BATCHES, {"action": "download_output", "_selected_action": [first.pk]})
    assert one.status_code == 302 and one["Location"] == _download(first, "output")
    two = viewer.post(BATCHES, {"action": "download_errors", "_selected_action": [first.pk, second.pk]}, follow=True)
    assert "Select one batch to download its file." in two.content.decode()
    assert _signed_in("nobody").get(_download(first, "output")).status_code == 403
    admin = _signed_in("admin", superuser=True)
    assert admin.get(_download(first, "input")).status_code == 404  # its upload was deleted
    assert admin.get(_download(first, "secrets")).status_code == 404


def _session_cookie(*perms: str, superuser: bool = False) -> str:
    client = _signed_in(f"staff-{next(_ids)}", *perms, superuser=superuser)
    return f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"


async def _staff(server: LiveServer, *perms: str, superuser: bool = False) -> httpx.AsyncClient:
    """A browser's view of the admin served as in production (the ASGI app under uvicorn), signed in as staff."""
    cookie = await db(lambda: _session_cookie(*perms, superuser=superuser))
    return httpx.AsyncClient(base_url=server.url, headers={"Cookie": cookie})


async def _downloaded(client: httpx.AsyncClient, url: str) -> bytes:
    response = await client.get(url)
    assert response.status_code == 200 and response.headers["content-type"] == "application/jsonl"
    return response.content


async def test_a_batch_run_through_the_api_is_shown_with_its_key_files_and_lines_linked_to_their_evaluations(
    api, asgi_server, fake, store, settings
):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    key = await db(lambda: apikey_issue(name="ticket router", owner="support"))
    auth = {"Authorization": f"Bearer {key.secret}"}
    bodies = [DECISIONS_REQUEST, DECISIONS_REQUEST, REFUSED]
    content = jsonl([line_of(custom_id=f"t-{i}", url="/v1/decisions", body=body) for i, body in enumerate(bodies)])
    uploaded = await file_upload(api, content, headers=auth)
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions", headers=auth)
    await tasks_run()
    batch = (await api.get(f"/v1/batches/{created.json()['id']}", headers=auth)).json()
    assert batch["status"] == "completed" and batch["request_counts"] == {"total": 3, "completed": 2, "failed": 1}

    admin = await _staff(asgi_server, superuser=True)
    listed = (await admin.get(BATCHES)).text
    assert "ticket router (" + key.label in listed and "2 · 1 · 3" in listed and 'style="width: 100%"' in listed
    ran = await db(lambda: Batch.objects.get(pk=batch["id"]))
    for kind, file_id in (("output", batch["output_file_id"]), ("error", batch["error_file_id"])):
        served = await api.get(f"/v1/files/{file_id}/content", headers=auth)
        assert await _downloaded(admin, _download(ran, kind)) == served.content
    assert await _downloaded(admin, _download(ran, "input")) == content

    lines = (await admin.get(f"{ITEMS}?batch={batch['id']}")).text
    stored = await db(lambda: dict(Evaluation.objects.values_list("request_id", "pk")))
    items = await db(lambda: list(BatchItem.objects.filter(batch_id=batch["id"]).order_by("line")))
    assert len(items) == 3 and all(item.request_id in stored for item in items[:2])
    for item in items[:2]:
        assert f'href="/admin/evaluations/evaluation/{stored[item.request_id]}/change/">{item.request_id}<' in lines
    errors = (await admin.get(f"{ITEMS}?batch={batch['id']}&outcome=error")).text
    assert "t-2" in errors and "t-0" not in errors and "its route refused the body (400)" in errors
    detail = (await admin.get(reverse("admin:batches_batchitem_change", args=[items[2].pk]))).text
    assert "invalid_request_error" in detail  # the route's own answer, as the error file holds it
    await admin.aclose()


async def test_links_to_keys_and_evaluations_are_shown_only_to_staff_who_may_view_them(api, asgi_server, fake, store):
    uploaded = await file_upload(api, jsonl([line_of(custom_id="a", url="/v1/decisions", body=DECISIONS_REQUEST)]))
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions")
    await tasks_run()
    batch_id = created.json()["id"]
    key = await db(lambda: apikey_issue(name="ticket router"))
    await db(lambda: Batch.objects.filter(pk=batch_id).update(owner=key.label))
    (item,) = await db(lambda: list(BatchItem.objects.filter(batch_id=batch_id)))

    async def page(url: str, *perms: str) -> str:
        async with await _staff(asgi_server, *perms) as client:
            response = await client.get(url)
        assert response.status_code == 200
        return response.text

    key_link = f"/admin/evaluations/apikey/{key.id}/change/"
    assert key_link not in await page(BATCHES, "batches.view_batch")
    assert key_link in await page(BATCHES, "batches.view_batch", "evaluations.view_apikey")
    items = f"{ITEMS}?batch={batch_id}"
    assert "/admin/evaluations/evaluation/" not in (plain := await page(items, "batches.view_batchitem"))
    assert item.request_id in plain
    linked = await page(items, "batches.view_batchitem", "evaluations.view_evaluation")
    assert f'/change/">{item.request_id}</a>' in linked
    change = reverse("admin:batches_batch_change", args=[quote(batch_id)])
    assert ITEMS not in await page(change, "batches.view_batch")
    assert f"{ITEMS}?batch={batch_id}" in await page(change, "batches.view_batch", "batches.view_batchitem")
