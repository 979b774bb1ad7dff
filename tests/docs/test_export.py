"""Schema export: `manage.py export_schema` writes what `/openapi.json` serves, with no model or backend."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import yaml
from django.core.management import CommandError, call_command

from serving.config import BASE_DIR
from tests.docs.conftest import openapi


async def test_export_writes_exactly_the_served_document(api, tmp_path):
    served = await openapi(api)
    target = tmp_path / "openapi.json"
    call_command("export_schema", "--output", str(target))
    assert json.loads(target.read_text()) == served
    out = io.StringIO()
    call_command("export_schema", "--server-url", "https://api.example.com/jev/", stdout=out)
    exported = json.loads(out.getvalue())
    assert exported["servers"] == [{"url": "https://api.example.com/jev", "description": "This server"}]
    assert exported["paths"] == served["paths"]


def test_export_refuses_a_server_url_that_is_not_a_path_or_url():
    with pytest.raises(CommandError, match="--server-url"):
        call_command("export_schema", "--server-url", "jev", stdout=io.StringIO())


async def test_drf_spectacular_command_gives_the_same_document_without_servers(api, tmp_path):
    served = await openapi(api)
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target), "--validate", "--fail-on-warn")
    assert yaml.safe_load(target.read_text()) == {k: v for k, v in served.items() if k != "servers"}


def test_export_needs_no_model_and_no_backend(tmp_path):
    """A fresh process pointed at an unreachable backend and a model file that does not exist."""
    env = {
        **os.environ,
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_BACKEND_URL": "http://127.0.0.1:9",
        "OPENJEV_TOKENIZER": str(tmp_path / "no-tokenizer"),
        "OPENJEV_LOCAL_MODEL": str(tmp_path / "none.gguf"),
        "OPENJEV_MODEL_CACHE": str(tmp_path / "cache"),
        "OPENJEV_DATABASE_URL": f"sqlite:///{tmp_path / 'db'}",
    }
    target = tmp_path / "openapi.json"
    done = subprocess.run(
        [sys.executable, "manage.py", "export_schema", "-o", str(target)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(target.read_text())
    assert "/v1/systemone" in document["paths"]
    assert not (tmp_path / "cache").exists()
    assert not (tmp_path / "db").exists()
