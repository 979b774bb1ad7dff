"""The official `openai` SDK, unchanged, against a running `serve` on the SGLang stand-in: a 200-line batch (of
`/v1/decisions`, `/v1/systemone` or `/v1/classify` lines, the last on a classifier saved in the shell) uploaded,
created, polled to `completed` and downloaded, every line once and each answer the one the route gives the same
body; `serve` (with its batch worker) SIGKILLed mid-batch and started again, the batch resuming to the same end, no
line answered or stored twice; its batch worker killed, started again, and one started before the migrations waiting
for them; a running batch cancelled, its backend work stopped within seconds; batch lines sent to the backend with
the batch priority, a bounded number at a time. Celery: test_celery_crash.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.batches.yielding import BATCH_NICENESS
from api.classify.openapi import CLASSIFY_REQUEST
from api.decisions.openapi_examples import DECISIONS_REQUEST
from fake_sglang import FakeSGLang
from inference.priority import INTERACTIVE_PRIORITY
from tests.batches.processes import (
    batch_ended,
    batch_env,
    batch_progressed,
    batch_uploaded,
    bodies_of,
    children_of,
    custom_ids,
    output_of,
    sdk_client,
    stand_in_process,
    stored_rows,
    tree_killed,
)
from tests.conftest import README_REQUEST
from tests.ops.helpers import ROOT, Serve, pid_alive

pytestmark = pytest.mark.servers

CANCEL_SECONDS = 5
"""How soon a cancelled batch has stopped: its worker reads the status twice a second, a running line finishes."""


@pytest.fixture
def stand_in() -> Iterator[str]:
    with stand_in_process(delay=0.02) as url:
        yield url


def _stable(body: Any) -> Any:
    """A body without ids, times and prefix-cache counts (which differ between two answers of one request)."""
    if isinstance(body, list):
        return [_stable(item) for item in body]
    if not isinstance(body, dict):
        return body
    return {k: _stable(v) for k, v in body.items() if k not in ("id", "created", "request_id") and "cache" not in k}


SENTIMENT_SAVED = """
from audit.models import Classifier
saved = Classifier.objects.create(name="sentiment", type="choice", instructions="What is the sentiment of this text?")
for name in ("positive", "negative", "neutral"):
    saved.labels.create(name=name)
"""
"""The saved classifier `/v1/classify`'s documented example asks for, made as an operator would (in the shell)."""


def _classifier_saved(tmp_path: Path) -> None:
    env = batch_env(tmp_path)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([sys.executable, "manage.py", "shell", "-c", SENTIMENT_SAVED], cwd=ROOT, env=env, check=True)


@pytest.mark.parametrize(
    ("url", "example", "field"),
    [
        ("/v1/decisions", DECISIONS_REQUEST, "input"),
        ("/v1/systemone", README_REQUEST, "state"),
        ("/v1/classify", CLASSIFY_REQUEST, "input"),
    ],
)
def test_the_sdk_runs_a_200_line_batch_and_each_answer_is_the_routes(stand_in, tmp_path, url, example, field):
    bodies = bodies_of(example, field, 200)
    if url == "/v1/classify":
        _classifier_saved(tmp_path)
    with Serve(["--connect", stand_in, "--migrate"], log=tmp_path / "serve.log", env=batch_env(tmp_path)) as serve:
        serve.wait_healthy()
        client = sdk_client(serve)
        batch = batch_ended(client, batch_uploaded(client, url=url, bodies=bodies).id)
        assert batch.status == "completed", batch
        assert batch.request_counts is not None and batch.request_counts.completed == 200
        assert batch.metadata == {"run": "tests"} and batch.error_file_id is None
        assert client.batches.list().data[0].id == batch.id
        output = output_of(client, batch)
        assert sorted(line["custom_id"] for line in output) == custom_ids(200)
        assert stored_rows(tmp_path) == 200
        for line in output[::20]:  # every 20th, sent again directly
            body = bodies[int(line["custom_id"].removeprefix("line-"))]
            direct = client.post(url.removeprefix("/v1"), body=body, cast_to=object)
            assert _stable(line["response"]["body"]) == _stable(direct)
        serve.terminate()


def test_serve_killed_mid_batch_and_started_again_finishes_it_with_every_line_once(stand_in, tmp_path):
    bodies = bodies_of(DECISIONS_REQUEST, "input", 600)
    env = batch_env(tmp_path)
    with Serve(["--connect", stand_in, "--migrate"], log=tmp_path / "serve-1.log", env=env) as serve:
        serve.wait_healthy()
        client = sdk_client(serve)
        batch_id = batch_uploaded(client, url="/v1/decisions", bodies=bodies).id
        batch_progressed(client, batch_id, done=100)
        tree_killed(serve.process.pid)  # the worker and the API, mid-batch, with no chance to tidy up
        serve.process.wait(10)
    with Serve(["--connect", stand_in], log=tmp_path / "serve-2.log", env=env) as again:
        again.wait_healthy()
        client = sdk_client(again)
        batch = batch_ended(client, batch_id)
        assert batch.status == "completed", (batch, again.log[-3000:])
        assert batch.request_counts is not None and batch.request_counts.completed == 600
        assert sorted(line["custom_id"] for line in output_of(client, batch)) == custom_ids(600)
        assert stored_rows(tmp_path) == 600
        again.terminate()


@pytest.fixture
def recording_stand_in() -> Iterator[FakeSGLang]:
    """The stand-in in this process, so a test reads what it was sent; each backend call takes 50 ms."""
    with FakeSGLang(delay=0.05) as fake:
        yield fake


def test_cancelling_a_running_batch_stops_its_backend_work_within_seconds(recording_stand_in, tmp_path):
    fake = recording_stand_in
    bodies = bodies_of(DECISIONS_REQUEST, "input", 2000)
    with Serve(["--connect", fake.url, "--migrate"], log=tmp_path / "serve.log", env=batch_env(tmp_path)) as serve:
        serve.wait_healthy()
        client = sdk_client(serve)
        batch_id = batch_uploaded(client, url="/v1/decisions", bodies=bodies).id
        batch_progressed(client, batch_id, done=50)
        asked = time.monotonic()
        assert client.batches.cancel(batch_id).status in ("cancelling", "cancelled")
        batch = batch_ended(client, batch_id, timeout=CANCEL_SECONDS)
        ended = time.monotonic() - asked
        calls = fake.generate_calls
        time.sleep(2)  # nothing more reaches the backend once the batch says it is cancelled
        assert fake.generate_calls == calls and fake.in_flight == 0
        assert batch.status == "cancelled" and ended < CANCEL_SECONDS, (batch, ended)
        counts = batch.request_counts
        assert counts is not None and 50 <= counts.completed < 2000 and counts.failed == 0
        answered = sorted(line["custom_id"] for line in output_of(client, batch))
        assert len(answered) == len(set(answered)) == counts.completed  # each answered line once, none lost
        assert stored_rows(tmp_path) == counts.completed
        assert client.batches.cancel(batch_id).status == "cancelled"  # a second cancel changes nothing
        serve.terminate()


def test_batch_lines_reach_the_backend_with_the_batch_priority_and_their_bounded_share(recording_stand_in, tmp_path):
    fake = recording_stand_in
    env = batch_env(tmp_path, OPENJEV_BATCH_PRIORITY="-7", OPENJEV_BATCH_CONCURRENCY="2")
    with Serve(["--connect", fake.url, "--migrate"], log=tmp_path / "serve.log", env=env) as serve:
        serve.wait_healthy()
        client = sdk_client(serve)
        fake.reset(controls=False)
        client.post("/decisions", body=DECISIONS_REQUEST, cast_to=object)
        interactive = [record["body"] for record in fake.requests]
        one_line = fake.max_in_flight  # the calls one request makes at once
        assert interactive and all(body.get("priority") == INTERACTIVE_PRIORITY for body in interactive)
        fake.reset(controls=False)
        batch = batch_ended(
            client, batch_uploaded(client, url="/v1/decisions", bodies=bodies_of(DECISIONS_REQUEST, "input", 30)).id
        )
        assert batch.status == "completed", batch
        sent = [record["body"] for record in fake.requests]
        assert len(sent) >= 30 and all(body.get("priority") == -7 for body in sent)
        assert fake.max_in_flight <= 2 * one_line  # OPENJEV_BATCH_CONCURRENCY lines at a time
        serve.terminate()


def _batch_worker_pids(serve: Serve) -> list[int]:
    return [pid for pid in children_of(serve.process.pid) if b"batch_worker" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def _niceness(pid: int) -> int:
    """A process's nice value (`/proc/PID/stat`'s 19th field)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_serve_starts_its_batch_worker_again_when_it_dies(stand_in, tmp_path):
    with Serve(["--connect", stand_in, "--migrate"], log=tmp_path / "serve.log", env=batch_env(tmp_path)) as serve:
        serve.wait_healthy()
        deadline = time.monotonic() + 30
        while len(pids := _batch_worker_pids(serve)) != 1:
            assert time.monotonic() < deadline, serve.log
            time.sleep(0.1)
        os.kill(pids[0], signal.SIGKILL)
        while not (again := _batch_worker_pids(serve)) or again == pids:
            assert time.monotonic() < deadline + 30, serve.log
            time.sleep(0.1)
        assert "the batch worker" in serve.log and "starting it again" in serve.log
        api_nice = _niceness(serve.process.pid)
        while not all(_niceness(pid) >= api_nice + BATCH_NICENESS for pid in again):  # the API gets the CPU first
            assert time.monotonic() < deadline + 60, "the batch worker kept the API's CPU priority"
            time.sleep(0.1)
        client = sdk_client(serve)
        bodies = bodies_of(DECISIONS_REQUEST, "input", 30)
        batch = batch_ended(client, batch_uploaded(client, url="/v1/decisions", bodies=bodies).id)
        assert batch.status == "completed" and sorted(line["custom_id"] for line in output_of(client, batch)) == (
            custom_ids(30)
        )
        assert serve.terminate() == 0
        assert not any(pid_alive(pid) for pid in again)


def test_a_batch_worker_started_before_migrations_waits_for_them_without_failing(stand_in, tmp_path):
    env = batch_env(tmp_path)
    with Serve(["--connect", stand_in], log=tmp_path / "serve.log", env=env) as serve:  # no --migrate
        serve.wait_healthy()
        deadline = time.monotonic() + 60
        while "the batch worker waits" not in serve.log:
            assert time.monotonic() < deadline, serve.log
            time.sleep(0.2)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
        client = sdk_client(serve)
        bodies = bodies_of(DECISIONS_REQUEST, "input", 20)
        batch = batch_ended(client, batch_uploaded(client, url="/v1/decisions", bodies=bodies).id)
        assert batch.status == "completed", (batch, serve.log[-3000:])
        assert "exited with" not in serve.log  # it waited, never failed
        assert serve.terminate() == 0
