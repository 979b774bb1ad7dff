"""The deploy directory runs batch jobs: the image holds every package the served application and its Celery
worker import, the compose file's replicas enqueue on Celery and its batch workers answer from the same settings,
on a Redis that keeps the queue on disk. The rest of the deploy directory: test_deploy.py."""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from serving.config_reading import config_from_env

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
TEST_ONLY = frozenset({"tests", "testbed", "fake_sglang", "bench", "conftest"})
"""What this test process itself loaded from the checkout, which the image does not need."""
SERVED = (
    "openjev_site.asgi",
    "openjev_site.urls",
    "openjev_site.celery",
    "api.batches.tasks",
    "api.management.commands.batch_worker",
)
"""What the image runs: the API, and the batch workers of both engines."""


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _copied() -> set[str]:
    copied = set()
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if not line.upper().startswith("COPY "):
            continue
        words = shlex.split(line, comments=True)
        if not any(w.startswith("--from") for w in words):
            copied |= {Path(source).parts[0].removesuffix(".py") for source in words[1:-1]}
    return copied


def test_the_image_holds_every_package_the_application_and_its_batch_workers_import():
    for entry in SERVED:
        importlib.import_module(entry)
    imported = set()
    for module in list(sys.modules.values()):
        path = Path(getattr(module, "__file__", None) or "/")
        if path.is_relative_to(ROOT) and ".venv" not in path.parts:
            imported.add(path.relative_to(ROOT).parts[0].removesuffix(".py"))
    assert "batches" in imported and imported - TEST_ONLY <= _copied()


def test_replicas_enqueue_batches_on_celery_and_the_batch_workers_answer_them_with_the_same_settings(compose):
    services = compose["services"]
    api, worker = services["api"], services["batch-worker"]
    assert worker["environment"] == api["environment"]  # a line is answered by the route's own service
    config = config_from_env({k: str(v) for k, v in api["environment"].items() if "${" not in str(v)})
    assert config.task_engine == "celery" and config.celery_broker_url == "redis://redis:6379/1"
    assert worker["image"] == api["image"] and worker["entrypoint"][:4] == ["celery", "-A", "openjev_site", "worker"]
    assert worker["deploy"]["replicas"] >= 2
    assert {name: c["condition"] for name, c in worker["depends_on"].items()} == {
        "migrate": "service_completed_successfully",
        "gateway": "service_started",
        "redis": "service_healthy",
    }


def test_the_broker_keeps_the_queue_on_disk(compose):
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
