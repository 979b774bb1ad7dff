"""A batch on the embedded llama.cpp model: the official SDK against a running `serve` (its batch worker a process
of its own with its own copy of the model), a few lines answered exactly as the route answers the same bodies."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.conf import settings

from api.decisions.openapi_examples import DECISIONS_REQUEST
from tests.batches.processes import (
    batch_ended,
    batch_env,
    batch_uploaded,
    bodies_of,
    custom_ids,
    output_of,
    sdk_client,
    stored_rows,
)
from tests.embedded import SMALL
from tests.ops.helpers import Serve

pytestmark = pytest.mark.embedded

VOLATILE = frozenset({"id", "created", "request_id", "input_tokens", "total_tokens"})
"""What differs between two answers of one body: ids, times, and the input tokens, which include the model's
content-free priors (debiasing) in whichever request of a process measured them first (the answers do not)."""


def _same(batch: Any, direct: Any, *, path: str = "") -> None:
    """Equal answers: the same shape and values, numbers within what two llama.cpp processes may round apart."""
    if isinstance(batch, dict):
        assert isinstance(direct, dict) and batch.keys() == direct.keys(), path
        for key in batch.keys() - VOLATILE:
            if "cache" not in key:
                _same(batch[key], direct[key], path=f"{path}.{key}")
    elif isinstance(batch, list):
        assert isinstance(direct, list) and len(batch) == len(direct), path
        for i, (a, b) in enumerate(zip(batch, direct, strict=True)):
            _same(a, b, path=f"{path}[{i}]")
    elif isinstance(batch, float) and not isinstance(direct, bool):
        assert math.isclose(batch, direct, abs_tol=1e-6), (path, batch, direct)
    else:
        assert batch == direct, path


def test_a_batch_on_the_embedded_model_answers_each_line_as_the_route_does(tmp_path):
    env = batch_env(
        tmp_path,
        OPENJEV_BACKEND="local",
        OPENJEV_LOCAL_MODEL=SMALL,
        OPENJEV_MODEL_CACHE=str(settings.OPENJEV.model_cache),  # the one the other embedded tests fill
        OPENJEV_REQUEST_TIMEOUT="1200",
    )
    bodies = bodies_of(DECISIONS_REQUEST, "input", 3)
    with Serve(["--migrate"], log=tmp_path / "serve.log", env=env) as serve:
        serve.wait_healthy(timeout=600)
        client = sdk_client(serve).with_options(timeout=1200)
        batch = batch_ended(client, batch_uploaded(client, url="/v1/decisions", bodies=bodies).id, timeout=900)
        assert batch.status == "completed", (batch, serve.log[-3000:])
        output = output_of(client, batch)
        assert sorted(line["custom_id"] for line in output) == custom_ids(3)
        assert stored_rows(tmp_path) == 3
        for line in output:
            direct = client.post("/decisions", body=bodies[int(line["custom_id"][5:])], cast_to=object)
            assert line["response"]["status_code"] == 200 and line["error"] is None
            _same(line["response"]["body"], direct)
        assert serve.terminate() == 0
