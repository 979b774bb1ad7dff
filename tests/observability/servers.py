"""What the multi-process observability tests share: Debian's Prometheus (or a failure saying how to get it),
`serve --workers 2` on the SGLang stand-in with both workers answering, and requests of known outcome, each on
a connection of its own (so the kernel spreads them over the workers)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.workloads import decisions_body_of
from testbed.prometheus import prometheus_binaries
from tests.conftest import README_REQUEST
from tests.ops.helpers import Serve, serve_env

JSON = {"Content-Type": "application/json"}
DECISIONS_REQUEST = decisions_body_of(README_REQUEST)
"""The README's questions as a `POST /v1/decisions` request."""


def prometheus_require() -> tuple[str, str]:
    """Debian's `prometheus` and `promtool`, or the test fails: an observability check that did not run is a
    defect, never a quiet skip. `scripts/test.sh` installs them (`prometheus_ensure`); without them, deselect
    the multi-process tests explicitly (`-m "not servers"`)."""
    found = prometheus_binaries()
    if found is None:
        pytest.fail(
            "prometheus or promtool is missing: apt-get install --no-install-recommends prometheus (scripts/test.sh "
            "does), or deselect the multi-process tests explicitly (pytest -m 'not servers')"
        )
    return found


def workers_answering(url: str, *, want: int = 2, timeout: float = 120.0) -> set[int]:
    """Wait until `want` worker processes answer `/health` (fresh connections; auth is off, so it names them)."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want:
        assert time.monotonic() < deadline, f"only workers {seen} answered within {timeout} s"
        try:
            response = httpx.get(url + "/health", timeout=10)
        except httpx.HTTPError:
            time.sleep(0.1)
            continue
        if response.status_code == 200:
            seen.add(response.json()["worker_pid"])
        else:
            time.sleep(0.1)
    return seen


def serve_two_workers(*, fake_url: str, log: Path, **env: str) -> Serve:
    """`manage.py serve --workers 2 --connect <the stand-in>` (evaluations not stored; key usage, which is
    counted at every storage level, into a fresh SQLite file beside the log that `--migrate` makes, never the
    checkout's database), started; the caller enters it and waits with `workers_answering`."""
    database = {"OPENJEV_DATABASE_URL": f"sqlite:///{log.with_name('serve.sqlite3')}"}
    return Serve(["--connect", fake_url, "--workers", "2", "--migrate"], log=log, env=serve_env(**database, **env))


def post(url: str, path: str, *, headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
    """One request on a new connection."""
    return httpx.post(url + path, headers=headers, timeout=30, **kwargs)


SENT = {
    ("systemone", "200"): 20,
    ("decisions", "200"): 20,
    ("systemone", "422"): 2,  # a model the server does not serve
    ("decisions", "404"): 1,  # the same, as OpenAI answers it
    ("decisions", "400"): 1,  # a body that is not JSON
    ("systemone", "405"): 1,  # GET on an evaluating route
}
"""What `requests_of_known_outcome` sends: (api, status) -> count; 45 in all, 5 of them invalid."""


def requests_of_known_outcome(url: str, *, traceparent: str | None = None) -> Counter[tuple[str, str]]:
    """Send `SENT`, each request on a new connection, and return what came back (api, status) -> count. The
    first System One request carries `traceparent` when one is given."""
    got: Counter[tuple[str, str]] = Counter()
    for i in range(SENT[("systemone", "200")]):
        sent = {"traceparent": traceparent} if traceparent is not None and i == 0 else None
        got["systemone", str(post(url, "/v1/systemone", json=README_REQUEST, headers=sent).status_code)] += 1
    for _ in range(SENT[("decisions", "200")]):
        got["decisions", str(post(url, "/v1/decisions", json=DECISIONS_REQUEST).status_code)] += 1
    for _ in range(SENT[("systemone", "422")]):
        got["systemone", str(post(url, "/v1/systemone", json={**README_REQUEST, "model": "nope"}).status_code)] += 1
    got["decisions", str(post(url, "/v1/decisions", json={**DECISIONS_REQUEST, "model": "nope"}).status_code)] += 1
    got["decisions", str(post(url, "/v1/decisions", content=b"{", headers=JSON).status_code)] += 1
    got["systemone", str(httpx.get(url + "/v1/systemone", timeout=30).status_code)] += 1
    return got
