"""What the batch tests on processes of their own share: the SGLang stand-in in a process, the service's
environment on a database file, the official SDK driving a batch to its end, and what the database then holds."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from openai import OpenAI
from openai.types import Batch

from testbed.ports import free_port
from tests.batches.conftest import jsonl, line_of
from tests.ops.helpers import ROOT, Serve, serve_env

ENDED = ("completed", "failed", "expired", "cancelled")


@contextmanager
def stand_in_process(*, delay: float = 0.02) -> Iterator[str]:
    """The stand-in in a process of its own, each backend call taking `delay` seconds as a GPU's would; its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "fake_sglang", "--port", str(port), "--delay", str(delay)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.kill()
        process.wait(10)


def batch_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A served API's environment with its own SQLite file, every evaluation stored, 50-line chunks."""
    return serve_env(
        OPENJEV_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        OPENJEV_STORE_EVALUATIONS="full",
        OPENJEV_SPOOL_DIR=str(tmp_path / "spool"),
        OPENJEV_BATCH_CHUNK_LINES="50",
        **extra,
    )


def sdk_client(serve: Serve) -> OpenAI:
    return OpenAI(base_url=f"{serve.url}/v1", api_key="unused", max_retries=2)


def bodies_of(example: dict[str, Any], field: str, count: int) -> list[dict[str, Any]]:
    """`count` different bodies: `example` with its `field` text numbered."""
    return [{**example, field: f"Ticket {i}: {example[field]}"} for i in range(count)]


def batch_uploaded(client: OpenAI, *, url: str, bodies: list[dict[str, Any]]) -> Batch:
    """A batch of `bodies` for `url`, custom ids `line-<i>`, created the way the SDK's users create one."""
    lines = [line_of(custom_id=f"line-{i}", url=url, body=body) for i, body in enumerate(bodies)]
    uploaded = client.files.create(file=("tickets.jsonl", jsonl(lines)), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(jsonl(lines))
    return client.batches.create(
        input_file_id=uploaded.id,
        endpoint=url,  # type: ignore[arg-type]  # the SDK's list is OpenAI's endpoints; the wire takes any
        completion_window="24h",
        metadata={"run": "tests"},
    )


def batch_ended(client: OpenAI, batch_id: str, *, timeout: float = 120) -> Batch:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ENDED:
            return batch
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} did not end within {timeout} s")


def batch_progressed(client: OpenAI, batch_id: str, *, done: int, timeout: float = 60) -> Batch:
    """The batch once at least `done` of its lines are answered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        counts = batch.request_counts
        if counts is not None and counts.completed + counts.failed >= done:
            return batch
        time.sleep(0.1)
    raise AssertionError(f"batch {batch_id} did not answer {done} lines within {timeout} s")


def output_of(client: OpenAI, batch: Batch) -> list[dict[str, Any]]:
    assert batch.output_file_id is not None, batch
    return [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]


def custom_ids(count: int) -> list[str]:
    return sorted(f"line-{i}" for i in range(count))


def stored_rows(tmp_path: Path) -> int:
    return int(_query(tmp_path, "SELECT COUNT(*) FROM evaluations_evaluation")[0][0])


def lines_taken_again(tmp_path: Path) -> int:
    """Lines claimed more than once: a dead worker's, taken back by another."""
    return int(_query(tmp_path, "SELECT COUNT(*) FROM batches_batchitem WHERE attempts > 1")[0][0])


def _query(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "db.sqlite3") as connection:
        return connection.execute(sql).fetchall()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    return found


def tree_killed(pid: int) -> None:
    """SIGKILL a process and its children at once, giving none of them a chance to tidy up."""
    for each in [*children_of(pid), pid]:
        try:
            os.kill(each, signal.SIGKILL)
        except ProcessLookupError:
            continue
