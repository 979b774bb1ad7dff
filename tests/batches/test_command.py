"""`manage.py batch` from a shell: a batch created as the routes create one (the same checks, limits and owner key),
watched on a progress bar until a worker has answered it, cancelled, and its results written as the API's files
hold them."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from api.batches import waiting
from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.keys import apikey_issue
from audit.models import ApiKey
from batches.models import Batch
from tests.batches.conftest import jsonl, line_of, output_lines, tasks_run
from tests.database import db

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

REFUSED = {**DECISIONS_REQUEST, "questions": [{"type": "choice", "name": "x", "instructions": "?", "choices": []}]}


def _file(tmp_path: Path, bodies: list[Any], name: str = "tickets.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(jsonl([line_of(custom_id=f"t-{i}", url="/v1/decisions", body=b) for i, b in enumerate(bodies)]))
    return path


def _batch(*args: Any) -> tuple[str, str]:
    """(stdout, stderr) of `manage.py batch ARGS`."""
    out, err = io.StringIO(), io.StringIO()
    call_command("batch", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


async def _created(path: Path, *args: str) -> dict[str, Any]:
    out, _ = await db(lambda: _batch("create", path, "--endpoint", "/v1/decisions", "--json", *args))
    created: dict[str, Any] = json.loads(out)
    return created


async def test_a_batch_created_from_the_shell_is_answered_by_the_workers_under_a_progress_bar(
    api, fake, store, tmp_path, monkeypatch
):
    path = _file(tmp_path, [DECISIONS_REQUEST, DECISIONS_REQUEST, REFUSED])
    created = await _created(path, "--metadata", "project=routing", "--metadata", "run=3")
    assert (created["status"], created["metadata"]) == ("validating", {"project": "routing", "run": "3"})
    assert created["request_counts"]["total"] == 3
    monkeypatch.setattr(waiting, "HINT_SECONDS", 0.1)

    async def worker_later() -> None:
        await asyncio.sleep(1.0)  # the shell is told how to run a worker meanwhile
        await tasks_run()

    (out, err), _ = await asyncio.gather(db(lambda: _batch("status", created["id"], "--wait")), worker_later())
    assert "no batch worker has taken it yet" in err and "manage.py batch_worker" in err
    assert "3/3" in err and "line" in err  # the bar, full
    assert out.splitlines()[0].startswith(f"{created['id']}: completed (/v1/decisions")
    assert "2 ok · 1 failed · 3 in all (100%)" in out and "output file file-" in out and "error file file-" in out
    served = (await api.get(f"/v1/batches/{created['id']}")).json()
    shown, _ = await db(lambda: _batch("status", created["id"], "--json"))
    assert json.loads(shown) == served  # the same object the API answers

    answers, errors = tmp_path / "answers.jsonl", tmp_path / "errors.jsonl"
    _, told = await db(lambda: _batch("results", created["id"], "--output", answers, "--errors", errors))
    assert "2 output line(s)" in told and "1 error line(s)" in told
    for path_written, file_id in ((answers, served["output_file_id"]), (errors, served["error_file_id"])):
        assert path_written.read_bytes() == (await api.get(f"/v1/files/{file_id}/content")).content
    printed, _ = await db(lambda: _batch("results", created["id"]))
    assert sorted(line["custom_id"] for line in output_lines(printed.encode())) == ["t-0", "t-1"]


async def test_create_wait_shows_the_bar_until_the_batch_ends(api, fake, store, tmp_path):
    path = _file(tmp_path, [DECISIONS_REQUEST])

    def create_and_wait() -> tuple[str, str]:
        return _batch("create", path, "--endpoint", "/v1/decisions", "--wait")

    async def worker_soon() -> None:
        while not await db(Batch.objects.exists):
            await asyncio.sleep(0.05)
        await tasks_run()

    (out, err), _ = await asyncio.gather(db(create_and_wait), worker_soon())
    assert ": completed (/v1/decisions" in out and "1 ok · 0 failed · 1 in all" in out and "1/1" in err


async def test_a_batch_of_a_key_is_seen_by_that_key_and_held_to_its_limits(api, fake, store, tmp_path, settings):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True)
    key = await db(lambda: apikey_issue(name="router"))
    created = await _created(_file(tmp_path, [DECISIONS_REQUEST]), "--key", key.label)
    listed = (await api.get("/v1/batches", headers={"Authorization": f"Bearer {key.secret}"})).json()
    assert [batch["id"] for batch in listed["data"]] == [created["id"]]

    slow = await db(lambda: apikey_issue(name="slow"))
    await db(lambda: ApiKey.objects.filter(pk=slow.id).update(requests_per_minute=1))
    lines = [DECISIONS_REQUEST] * (24 * 60 + 1)  # more than one request a minute runs in 24 hours
    with pytest.raises(CommandError, match="within the completion window"):
        await _created(_file(tmp_path, lines, "many.jsonl"), "--key", slow.label)
    with pytest.raises(CommandError, match="is no issued key's label"):
        await _created(_file(tmp_path, [DECISIONS_REQUEST]), "--key", "oj_nosuchkey")


async def test_cancel_stops_a_batch_and_cancelling_twice_is_harmless(api, fake, store, tmp_path):
    created = await _created(_file(tmp_path, [DECISIONS_REQUEST] * 3))
    first, _ = await db(lambda: _batch("cancel", created["id"]))
    assert f"{created['id']}: cancelling" in first
    await tasks_run()  # its validation finds it cancelled: ended with nothing run
    again, _ = await db(lambda: _batch("cancel", created["id"]))
    assert f"{created['id']}: cancelled" in again and fake.generate_calls == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("status", "batch_nope"), "no batch 'batch_nope'"),
        (("results", "batch_nope"), "no batch 'batch_nope'"),
        (("create", "{binary}", "--endpoint", "/v1/decisions"), "line 1 is not UTF-8 text"),
        (("create", "{missing}", "--endpoint", "/v1/decisions"), "No such file or directory"),
        (("create", "{file}", "--endpoint", "/v1/decisions", "--metadata", "novalue"), "is not KEY=VALUE"),
        (("create", "{file}", "--endpoint", "/v1/decisions", "--metadata", f"k={'v' * 513}"), "metadata keys are"),
    ],
)
async def test_what_the_shell_gets_wrong_is_a_command_error_and_nothing_is_made(api, store, tmp_path, args, message):
    paths = {
        "{binary}": tmp_path / "image.png",
        "{missing}": tmp_path / "missing.jsonl",
        "{file}": _file(tmp_path, [DECISIONS_REQUEST]),
    }
    paths["{binary}"].write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(CommandError, match=message):
        await db(lambda: _batch(*(paths.get(arg, arg) for arg in args)))
    assert not await db(Batch.objects.exists)
