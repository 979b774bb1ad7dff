"""Batch jobs in process: the API through ASGI, the tasks run by django-tasks-db's own worker on the test
database, the stand-in behind the evaluator. Stored data, each test isolated (`tests/stored.py`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
from django_tasks_db.management.commands.db_worker import Worker

from tests.database import db
from tests.stored import storage_isolated

__all__ = ["storage_isolated"]


def _worked() -> None:
    Worker(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="tests",
        excluded_queue_names=[],
    ).run()


async def tasks_run() -> None:
    """Every task enqueued so far (and those they enqueue), by the real worker, until none is ready."""
    await db(_worked)


def jsonl(lines: Sequence[Any]) -> bytes:
    return b"".join((line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)


def line_of(*, custom_id: str, url: str, body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


async def file_upload(
    api: httpx.AsyncClient, content: bytes, *, purpose: str = "batch", headers: dict[str, str] | None = None
) -> httpx.Response:
    return await api.post(
        "/v1/files", files={"file": ("input.jsonl", content)}, data={"purpose": purpose}, headers=headers or {}
    )


async def batch_create(
    api: httpx.AsyncClient, *, file_id: str, endpoint: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h"}
    return await api.post("/v1/batches", json=body, headers=headers or {})


def output_lines(content: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in content.splitlines() if line.strip()]
