"""A large body on a format's route is screened in another process first: one its format refuses is answered (and
stored) exactly as if the server had read it, without the server's interpreter decoding it; one it accepts is read
as before; a screening process that cannot answer leaves the body to be read here."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.plumbing import bodies, body_screen
from api.plumbing.bodies import Body
from api.plumbing.formats import ErrorShape, FormatCheck, Refused, route_of_path, wire_formats
from tests.conftest import README_REQUEST

PROSE = "The parcel for my order is late and the invoice is wrong. " * 1_500
"""About 87 KB: a body over `SCREEN_BYTES` whatever else it holds."""
REPO_ROOT = Path(__file__).resolve().parents[2]
DECISIONS = {"model": "jev-latest", "input": PROSE, "questions": [{"type": "predicate", "instructions": "Late?"}]}
UNKNOWN_FIELDS = json.dumps(DECISIONS | {f"u{i:06d}": 1 for i in range(20_000)})

REFUSED: dict[str, tuple[str, str]] = {
    "decisions_unknown_fields": ("/v1/decisions", UNKNOWN_FIELDS),
    "decisions_unknown_model": ("/v1/decisions", json.dumps(DECISIONS | {"model": "no-such-model"})),
    "google_shape_bad_type": (
        "/v1/decisions",
        json.dumps({"model": "jev-latest", "input": PROSE, "questions": {"q": {"type": "box"}}}),
    ),
    "v1beta_missing_questions": ("/v1beta/decisions", json.dumps({"model": "jev-latest", "input": PROSE})),
    "systemone_bad_type": (
        "/v1/systemone",
        json.dumps({**README_REQUEST, "state": PROSE, "questions": {"q": {"type": "box"}}}),
    ),
    "systemone_not_json": ("/v1/systemone", json.dumps({**README_REQUEST, "state": PROSE})[:-2]),
    "classify_no_input": ("/v1/classify", json.dumps({"model": "no-such-classifier", "prose": PROSE})),
}
"""Large bodies each route refuses, one per kind of refusal: unknown fields, a model not served (OpenAI's 404),
Google's shape claimed on a shared path, Google's own path, a located 422, a body that is not JSON, classify's."""


def route_shape(path: str) -> ErrorShape:
    route = route_of_path(path)
    assert route is not None
    return route.primary.shape


def without_request_id(response: httpx.Response) -> tuple[int, str]:
    request_id = response.headers["x-typesafe-request-id"]
    return response.status_code, response.text.replace(request_id, "<request id>")


@pytest.fixture
def decoded_here(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the bodies this process decodes."""
    sizes: list[int] = []
    parse = bodies.body_parse

    def counted(raw: bytes) -> Any:
        sizes.append(len(raw))
        return parse(raw)

    monkeypatch.setattr(bodies, "body_parse", counted)
    return sizes


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_a_large_body_its_format_refuses_is_answered_as_if_read_here_without_decoding_it(
    api: httpx.AsyncClient, fake: Any, decoded_here: list[int], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    path, body = REFUSED[case]
    assert len(body) >= body_screen.SCREEN_BYTES
    headers = {"Content-Type": "application/json"}
    screened = await api.post(path, content=body, headers=headers)
    assert decoded_here == []
    monkeypatch.setattr(body_screen, "SCREEN_BYTES", sys.maxsize)
    read_here = await api.post(path, content=body, headers=headers)
    assert decoded_here, "the second time the body was read here"
    assert 400 <= screened.status_code < 500
    assert without_request_id(screened) == without_request_id(read_here)


async def test_a_large_multipart_body_whose_request_part_is_refused_is_answered_as_if_read_here(
    api: httpx.AsyncClient, fake: Any, decoded_here: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = json.dumps({**README_REQUEST, "state": PROSE, "questions": {"q": {"type": "box"}}})
    files = {"request": (None, request, "application/json")}
    screened = await api.post("/v1/systemone", files=files)
    assert decoded_here == []
    monkeypatch.setattr(body_screen, "SCREEN_BYTES", sys.maxsize)
    read_here = await api.post("/v1/systemone", files=files)
    assert screened.status_code == 422 and without_request_id(screened) == without_request_id(read_here)


def test_what_the_audit_stores_of_a_refused_body_is_what_its_format_reads_of_it() -> None:
    path, body = REFUSED["systemone_bad_type"]
    read = body_screen.body_screened_read(
        raw=body.encode(), content_type="application/json", shape=route_shape(path), path=path
    )
    assert isinstance(read.data, Refused) and read.data.format == "systemone"
    route = route_of_path(path)
    check = route.primary.check if route is not None else None
    assert check is not None
    assert read.data.received == check().unparsed(data=json.loads(body))


def test_a_large_body_its_format_accepts_is_read_here() -> None:
    body = json.dumps({**README_REQUEST, "state": PROSE}).encode()
    read = body_screen.body_screened_read(
        raw=body,
        content_type="application/json",
        shape=route_shape("/v1/systemone"),
        path="/v1/systemone",
    )
    assert read == Body(data=json.loads(body), size=len(body))


def test_without_a_screening_process_a_body_is_read_here_and_none_is_started_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    submitted: list[object] = []

    class Broken:
        def submit(self, *args: Any, **kwargs: Any) -> Any:
            submitted.append(args)
            raise BrokenProcessPool("the screening process died")

        def shutdown(self, *, wait: bool, cancel_futures: bool) -> None:
            pass

    monkeypatch.setattr(body_screen, "_pool", Broken)
    monkeypatch.setitem(body_screen._retry_at, "t", 0.0)  # put back after the test
    path, body = REFUSED["systemone_bad_type"]
    reads = [
        body_screen.body_screened_read(
            raw=body.encode(), content_type="application/json", shape=route_shape(path), path=path
        )
        for _ in range(3)
    ]
    assert reads == [Body(data=json.loads(body), size=len(body))] * 3
    assert len(submitted) == 1


SCREENING_SERVER = """
import os, sys, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")
django.setup()
from api.plumbing import body_screen
from api.plumbing.formats import route_of_path
raw = sys.stdin.buffer.read()
shape = route_of_path("/v1/systemone").primary.shape
body_screen.body_screened_read(raw=raw, content_type="application/json", shape=shape, path="/v1/systemone")
print(*body_screen._pools[os.getpid()]._processes, flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie left for a PID 1 that does not reap is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_the_screening_process_ends_when_its_server_process_is_killed() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SCREENING_SERVER],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(REFUSED["systemone_bad_type"][1].encode())
    server.stdin.close()
    child = int(server.stdout.readline())
    assert running(child)
    server.kill()
    server.wait()
    deadline = time.monotonic() + 10 * body_screen.PARENT_CHECK_SECONDS
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(child)


def test_every_installed_formats_check_crosses_to_the_screening_process() -> None:
    """A check that cannot be pickled (a lambda, a local function) would leave its format's large bodies unscreened
    without a word: every installed format has a check, and each crosses."""
    for wire_format in wire_formats():
        assert wire_format.check is not None, wire_format.name
        restored = pickle.loads(pickle.dumps(wire_format.check()))
        assert isinstance(restored, FormatCheck) and callable(restored.parse) and callable(restored.unparsed)
