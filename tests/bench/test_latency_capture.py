"""bench/latency.py's stand-in, as a process: it answers after its fixed service times, and captures the calls made
between two SIGUSR2s (the raw client replays those), keeping no record outside a capture."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import httpx
import pytest

from bench.server import fake_process_start
from testbed.ports import free_port
from tests.fake_sglang.helpers import PREFIX, batch_body, body

pytestmark = pytest.mark.servers

LATENCY = Path(__file__).resolve().parents[2] / "bench" / "latency.py"


def test_the_stand_in_answers_after_its_service_times_and_captures_only_between_two_signals() -> None:
    port = free_port()
    fake = fake_process_start(port=port, script=LATENCY, options=["--warm-ms", "150", "--batch-ms", "80"])
    assert fake.stdout is not None
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            http.post("/generate", json=body(PREFIX, [1], rid="before"))  # not captured
            fake.send_signal(signal.SIGUSR2)
            assert json.loads(fake.stdout.readline()) == {"recording": True}
            start = time.perf_counter()
            assert http.post("/generate", json=body(PREFIX, [1], rid="warm")).status_code == 200
            warmed = time.perf_counter()
            batch = batch_body([[1], [2]], [[1], [1]], ["b0", "b1"])
            assert http.post("/generate", json=batch).status_code == 200
            done = time.perf_counter()
            fake.send_signal(signal.SIGUSR2)
            captured = json.loads(fake.stdout.readline())["bodies"]
            http.post("/generate", json=body(PREFIX, [1], rid="after"))  # not captured either
            fake.send_signal(signal.SIGUSR2)
            assert json.loads(fake.stdout.readline()) == {"recording": True}
            fake.send_signal(signal.SIGUSR2)
            assert json.loads(fake.stdout.readline()) == {"bodies": []}
    finally:
        fake.terminate()
        fake.wait(10)
    assert [b["rid"] for b in captured] == ["warm", ["b0", "b1"]]
    assert captured[1] == batch
    assert warmed - start >= 0.15 and done - warmed >= 0.08
