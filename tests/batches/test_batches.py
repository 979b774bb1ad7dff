"""OpenAI's Files and Batches API for decision lines, in process: a batch's lines answered exactly as their route
answers the same bodies, every line once, bad files and lines refused with the route's own errors, a key seeing
only its own files and batches, cancel. The official SDK against a running `serve` is in test_sdk_serve.py."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from api.classify.openapi import CLASSIFY_REQUEST
from api.decisions.openapi_examples import DECISIONS_REQUEST
from api.google.openapi import GOOGLE_REQUEST
from audit.keys import apikey_cache_forget, apikey_issue
from audit.models import ApiKey, Evaluation
from batches.models import Batch
from tests.batches.conftest import batch_create, file_upload, jsonl, line_of, output_lines, tasks_run
from tests.classify.conftest import SENTIMENT, classifiers
from tests.conftest import README_REQUEST
from tests.database import db

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

__all__ = ["classifiers"]

VOLATILE = frozenset({"id", "created", "created_at", "request_id", "timings", "latency_ms", "model_version"})


def _stable(body: Any) -> Any:
    """A response body without what differs between two answers of the same request: ids, times, and how many of
    its tokens the backend's prefix cache held (which depends on what it was asked before)."""
    if isinstance(body, list):
        return [_stable(item) for item in body]
    if not isinstance(body, dict):
        return body
    return {k: _stable(v) for k, v in body.items() if k not in VOLATILE and "cache" not in k}


def _bodies(url: str, count: int) -> list[dict[str, Any]]:
    """`count` different bodies for `url`: the route's documented example with its text varied."""
    example = {
        "/v1/decisions": DECISIONS_REQUEST,
        "/v1/systemone": README_REQUEST,
        "/v1/classify": CLASSIFY_REQUEST,
        "google": GOOGLE_REQUEST,
    }[url]
    field = "state" if "state" in example else "input"
    bodies = []
    for i in range(count):
        body = copy.deepcopy(example)
        text = body[field]
        body[field] = [f"Ticket {i}: {t}" for t in text] if isinstance(text, list) else f"Ticket {i}: {text}"
        bodies.append(body)
    return bodies


async def _batch_run(api, *, url: str, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    lines = [line_of(custom_id=f"line-{i}", url=url, body=body) for i, body in enumerate(bodies)]
    uploaded = await file_upload(api, jsonl(lines))
    assert uploaded.status_code == 200, uploaded.text
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint=url)
    assert created.status_code == 200, created.text
    assert created.json()["status"] == "validating"
    await tasks_run()
    return (await api.get(f"/v1/batches/{created.json()['id']}")).json()


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("/v1/decisions", "/v1/decisions"),
        ("/v1/decisions", "google"),
        ("/v1/systemone", "/v1/systemone"),
        ("/v1/classify", "/v1/classify"),
    ],
)
async def test_every_line_is_answered_once_exactly_as_its_route_answers_the_same_body(
    api, fake, store, classifiers, url, kind
):
    classifiers(SENTIMENT)
    bodies = _bodies(kind, 12)
    before = await db(Evaluation.objects.count)
    batch = await _batch_run(api, url=url, bodies=bodies)
    assert batch["status"] == "completed", batch
    assert batch["request_counts"] == {"total": 12, "completed": 12, "failed": 0}
    assert batch["error_file_id"] is None
    output = output_lines((await api.get(f"/v1/files/{batch['output_file_id']}/content")).content)
    assert sorted(line["custom_id"] for line in output) == sorted(f"line-{i}" for i in range(12))
    assert await db(Evaluation.objects.count) == before + 12  # one stored row per line, none twice
    for line in output:
        direct = await api.post(url, json=bodies[int(line["custom_id"].removeprefix("line-"))])
        assert line["response"]["status_code"] == 200 and line["error"] is None
        assert _stable(line["response"]["body"]) == _stable(direct.json())


async def test_a_line_its_route_refuses_goes_to_the_error_file_with_the_routes_error(api, fake, store):
    bad = {
        **DECISIONS_REQUEST,
        "questions": [{"type": "choice", "name": "x", "instructions": "?", "choices": [{"value": "only"}]}],
    }
    direct = await api.post("/v1/decisions", json=bad)
    batch = await _batch_run(api, url="/v1/decisions", bodies=[DECISIONS_REQUEST, bad])
    assert batch["status"] == "completed" and batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    (error,) = output_lines((await api.get(f"/v1/files/{batch['error_file_id']}/content")).content)
    assert error["custom_id"] == "line-1" and error["response"]["status_code"] == direct.status_code == 400
    assert error["response"]["body"] == direct.json()


@pytest.mark.parametrize(
    ("lines", "code"),
    [
        ([b"{not json"], "invalid_json_line"),
        ([line_of(custom_id="a", url="/v1/decisions", body=DECISIONS_REQUEST)] * 2, "duplicate_custom_id"),
        ([line_of(custom_id="a", url="/v1/systemone", body=README_REQUEST)], "mismatched_endpoint"),
        ([{"custom_id": "", "method": "POST", "url": "/v1/decisions", "body": {}}], "invalid_custom_id"),
    ],
)
async def test_a_file_that_is_not_a_batch_of_its_endpoint_fails_the_batch_naming_the_line(
    api, fake, store, lines, code
):
    uploaded = await file_upload(api, jsonl(lines))
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions")
    await tasks_run()
    batch = (await api.get(f"/v1/batches/{created.json()['id']}")).json()
    assert batch["status"] == "failed" and batch["output_file_id"] is None
    codes = [error["code"] for error in batch["errors"]["data"]]
    assert code in codes and all(error["line"] for error in batch["errors"]["data"])
    assert fake.generate_calls == 0  # checked before any model work


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "invalid_file"),
        (b'{"custom_id": "\xff"}\n', "invalid_file"),
        (b"\n\n", "empty_file"),
    ],
)
async def test_an_upload_that_is_not_a_jsonl_batch_is_refused_with_a_400_and_nothing_stored(api, store, content, code):
    refused = await file_upload(api, content)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == code and len(error["message"]) < 300
    assert (await api.get("/v1/files")).json()["data"] == []


async def test_a_file_over_the_line_limit_is_refused(api, store, settings):
    settings.OPENJEV = replace(settings.OPENJEV, batch_max_lines=3)
    lines = [line_of(custom_id=str(i), url="/v1/decisions", body={}) for i in range(4)]
    refused = await file_upload(api, jsonl(lines))
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "too_many_lines"


async def test_only_batch_files_are_taken(api, store):
    refused = await file_upload(api, jsonl([{}]), purpose="fine-tune")
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "purpose"


async def test_a_missing_batch_or_file_is_a_404_in_openais_shape(api, store):
    for path in ("/v1/batches/batch_nope", "/v1/files/file-nope", "/v1/files/file-nope/content"):
        response = await api.get(path)
        assert response.status_code == 404 and response.json()["error"]["type"] == "invalid_request_error"
    created = await batch_create(api, file_id="file-nope", endpoint="/v1/decisions")
    assert created.status_code == 404


async def test_an_endpoint_batches_do_not_run_is_refused(api, store):
    uploaded = await file_upload(api, jsonl([line_of(custom_id="a", url="/v1/decisions", body={})]))
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/chat/completions")
    assert created.status_code == 400 and created.json()["error"]["param"] == "endpoint"


def _keys(settings) -> tuple[dict[str, str], dict[str, str]]:
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    first, second = apikey_issue(name="a", owner="a"), apikey_issue(name="b", owner="b")
    return {"Authorization": f"Bearer {first.secret}"}, {"Authorization": f"Bearer {second.secret}"}


async def test_a_key_sees_and_cancels_only_its_own_files_and_batches(api, fake, store, settings):
    mine, theirs = await db(lambda: _keys(settings))
    uploaded = await file_upload(
        api, jsonl([line_of(custom_id="a", url="/v1/decisions", body=DECISIONS_REQUEST)]), headers=mine
    )
    file_id = uploaded.json()["id"]
    assert (await api.get(f"/v1/files/{file_id}", headers=theirs)).status_code == 404
    assert (await api.get(f"/v1/files/{file_id}/content", headers=theirs)).status_code == 404
    assert (await batch_create(api, file_id=file_id, endpoint="/v1/decisions", headers=theirs)).status_code == 404
    batch_id = (await batch_create(api, file_id=file_id, endpoint="/v1/decisions", headers=mine)).json()["id"]
    assert (await api.get(f"/v1/batches/{batch_id}", headers=theirs)).status_code == 404
    assert (await api.post(f"/v1/batches/{batch_id}/cancel", headers=theirs)).status_code == 404
    assert (await api.get("/v1/batches", headers=theirs)).json()["data"] == []
    assert [b["id"] for b in (await api.get("/v1/batches", headers=mine)).json()["data"]] == [batch_id]
    assert (await api.get("/v1/files", headers=mine)).json()["data"][0]["id"] == file_id
    assert (await api.delete(f"/v1/files/{file_id}", headers=theirs)).status_code == 404
    assert (await api.get("/v1/files")).status_code == 401


async def test_a_batch_its_key_could_not_run_within_the_window_is_refused_at_creation_with_429(api, store, settings):
    mine, _ = await db(lambda: _keys(settings))
    lines = [line_of(custom_id=str(i), url="/v1/decisions", body={}) for i in range(1441)]
    uploaded = await file_upload(api, jsonl(lines), headers=mine)
    await db(lambda: ApiKey.objects.update(requests_per_minute=1))  # 1,440 requests in the 24 h window
    apikey_cache_forget()
    created = await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions", headers=mine)
    assert created.status_code == 429, created.text
    assert created.headers["x-should-retry"] == "false"
    assert "within the completion window" in created.json()["error"]["message"]
    assert await db(Batch.objects.count) == 0


async def test_cancelling_twice_is_harmless_and_a_cancelled_batch_runs_nothing(api, fake, store):
    uploaded = await file_upload(api, jsonl([line_of(custom_id="a", url="/v1/decisions", body=DECISIONS_REQUEST)]))
    batch_id = (await batch_create(api, file_id=uploaded.json()["id"], endpoint="/v1/decisions")).json()["id"]
    first = await api.post(f"/v1/batches/{batch_id}/cancel")
    second = await api.post(f"/v1/batches/{batch_id}/cancel")
    assert first.status_code == second.status_code == 200
    assert first.json()["status"] == second.json()["status"] == "cancelling"
    await tasks_run()
    batch = (await api.get(f"/v1/batches/{batch_id}")).json()
    assert batch["status"] == "cancelled" and batch["cancelled_at"] is not None
    assert fake.generate_calls == 0
    again = await api.post(f"/v1/batches/{batch_id}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


async def test_a_batch_is_stored_with_one_item_per_line(api, fake, store):
    batch = await _batch_run(api, url="/v1/decisions", bodies=_bodies("/v1/decisions", 3))
    stored = await db(lambda: Batch.objects.get(pk=batch["id"]))
    assert await db(stored.items.count) == 3 and stored.done == 3


def _lines_of_size(size: int) -> bytes:
    """A batch file of at least `size` bytes of valid lines."""
    line = jsonl([line_of(custom_id="0", url="/v1/decisions", body={"input": "x" * 1000})])
    return b"".join(line.replace(b'"0"', f'"{i}"'.encode(), 1) for i in range(size // len(line) + 1))


async def test_an_upload_larger_than_the_body_limit_is_streamed_up_to_the_file_limit(api, store, settings):
    content = _lines_of_size(3 * 1024 * 1024)  # over OPENJEV_MAX_BODY_BYTES (2 MB), under the file limit
    uploaded = await file_upload(api, content)
    assert uploaded.status_code == 200, uploaded.text[:300]
    assert uploaded.json()["bytes"] == len(content)


async def test_an_upload_over_the_file_limit_is_a_413_and_nothing_is_stored(api, store, settings):
    settings.OPENJEV = replace(settings.OPENJEV, batch_max_file_bytes=1024 * 1024)
    for size in (1024 * 1024 + 1, 3 * 1024 * 1024):  # the file part over the limit; the whole body over it
        refused = await file_upload(api, _lines_of_size(size))
        assert refused.status_code == 413, refused.text[:300]
        assert refused.json()["error"]["code"] == "request_too_large"
    assert (await api.get("/v1/files")).json()["data"] == []


async def test_a_large_upload_without_a_valid_key_gets_only_the_ordinary_body_limit(api, store, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key="the-key")
    content = _lines_of_size(3 * 1024 * 1024)
    refused = await file_upload(api, content, headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 413, refused.text[:300]
    uploaded = await file_upload(api, content, headers={"Authorization": "Bearer the-key"})
    assert uploaded.status_code == 200, uploaded.text[:300]


async def test_a_line_of_10_mb_is_refused_naming_it_and_nothing_is_stored(api, store):
    line = jsonl([line_of(custom_id="big", url="/v1/decisions", body={"input": "x" * (10 * 1024 * 1024)})])
    refused = await file_upload(api, jsonl([line_of(custom_id="small", url="/v1/decisions", body={})]) + line)
    assert refused.status_code == 400, refused.text[:300]
    error = refused.json()["error"]
    assert error["code"] == "line_too_long" and "line 2" in error["message"] and len(error["message"]) < 300
    assert (await api.get("/v1/files")).json()["data"] == []
