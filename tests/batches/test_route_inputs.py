"""What a client sends OpenAI's Files and Batches routes is answered in OpenAI's shape, a 4xx for its mistakes and
never a 5xx: odd list cursors and creation fields, broken uploads, paths under the routes that name no route, and
a body the body reader refuses before any view runs. A file's name goes out in a header a browser can read."""

from __future__ import annotations

from email.message import Message
from typing import Any

import pytest

from tests.batches.conftest import file_upload, jsonl, line_of

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _openai_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert response.headers["x-should-retry"] == "false"
    return error


@pytest.mark.parametrize("path", ["/v1/files", "/v1/batches"])
@pytest.mark.parametrize("limit", ["²", "1" * 5000, "-1", "0", "101", "ten", ""])
async def test_a_list_limit_that_is_not_1_to_100_is_a_400(api, path, limit):
    error = _openai_error(await api.get(path, params={"limit": limit}), 400)
    assert error["param"] == "limit"


@pytest.mark.parametrize(
    "body",
    [
        {"input_file_id": "file-x", "endpoint": "/v1/decisions", "completion_window": ["24h"]},
        {"input_file_id": "file-x", "endpoint": "/v1/decisions", "completion_window": {"24h": 1}},
        {"input_file_id": "file-x", "endpoint": ["/v1/decisions"]},
        {"input_file_id": "file-x", "endpoint": "/v1/decisions", "metadata": {"k": ["v"]}},
        {"input_file_id": ["file-x"], "endpoint": "/v1/decisions"},
        ["not", "an", "object"],
    ],
)
async def test_creation_fields_of_the_wrong_type_are_a_400(api, body):
    _openai_error(await api.post("/v1/batches", json=body), 400)


async def test_a_multipart_body_that_cannot_be_parsed_is_a_400(api):
    for content_type in ("multipart/form-data", "multipart/form-data; boundary=x"):
        response = await api.post("/v1/files", content=b"--y\r\nnonsense", headers={"Content-Type": content_type})
        _openai_error(response, 400)


async def test_what_answers_before_the_view_is_in_openai_shape_too(api):
    _openai_error(await api.get("/v1/files/a/b/c"), 404)
    _openai_error(await api.post("/v1/batches/a/b/c", json={}), 404)
    corrupt = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    _openai_error(await api.post("/v1/batches", content=b"not gzip", headers=corrupt), 400)


async def test_a_cross_site_form_cannot_cancel_a_batch(api):
    response = await api.post(
        "/v1/batches/batch_x/cancel",
        content=b"",
        headers={"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert _openai_error(response, 403)["type"] == "permission_error"


async def test_a_file_name_with_separators_and_accents_is_sent_as_the_name_it_was(api):
    name = "tickets; march=é, April.jsonl"
    line = line_of(custom_id="a", url="/v1/decisions", body={})
    uploaded = await api.post("/v1/files", files={"file": (name, jsonl([line]))}, data={"purpose": "batch"})
    assert uploaded.status_code == 200, uploaded.text
    content = await api.get(f"/v1/files/{uploaded.json()['id']}/content")
    header = Message()
    header["Content-Disposition"] = content.headers["content-disposition"]
    assert header.get_filename() == name == uploaded.json()["filename"]
    assert content.content == jsonl([line])


async def test_an_upload_without_a_purpose_or_a_file_part_is_a_400_naming_it(api):
    missing = await api.post("/v1/files", files={"file": ("a.jsonl", b"{}\n")})
    assert _openai_error(missing, 400)["param"] == "purpose"
    no_file = await api.post("/v1/files", data={"purpose": "batch"}, files={"other": ("a", b"x")})
    assert _openai_error(no_file, 400)["param"] == "file"
    assert (await file_upload(api, b"\n\n")).json()["error"]["code"] == "empty_file"
