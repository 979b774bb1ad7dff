"""`Sidecar` (the batch worker `serve` keeps beside the API) with cheap processes (`python -c` that sleeps or
exits): started again when it dies, resting a window after a crash loop, stopped with nothing left behind. No
timing assertion beyond generous bounds. `serve` restarting its real batch worker: tests/batches/test_sdk_serve.py."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable

from serving.sidecar import Sidecar
from serving.workers import RestartPolicy
from tests.ops.helpers import pid_alive

FAST = RestartPolicy(backoff_first=0.01, backoff_max=0.05, window=30, deaths_max=3)
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _wait_for(predicate: Callable[[], bool], *, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.02)


def _sidecar(argv: list[str], *, policy: RestartPolicy = FAST) -> Sidecar:
    sidecar = Sidecar(argv=argv, name="test sidecar", policy=policy, grace=5)
    sidecar.start()
    return sidecar


def _running_pid(sidecar: Sidecar) -> int:
    _wait_for(lambda: sidecar.process is not None and sidecar.process.poll() is None, what="the process starting")
    assert sidecar.process is not None
    return sidecar.process.pid


def test_a_sidecar_that_dies_is_started_again_and_stopped_with_the_api():
    sidecar = _sidecar(SLEEPER)
    try:
        first = _running_pid(sidecar)
        os.kill(first, signal.SIGKILL)
        _wait_for(lambda: sidecar.restarts == 1 and _running_pid(sidecar) != first, what="a restart")
        second = _running_pid(sidecar)
    finally:
        sidecar.stop()
    assert not pid_alive(first) and not pid_alive(second)  # stop() returns with nothing left running
    assert sidecar.rests == 0


def test_a_sidecar_in_a_crash_loop_rests_a_whole_window_before_it_tries_again():
    sidecar = _sidecar([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        _wait_for(lambda: sidecar.rests == 1, what="a crash loop")
        restarts = sidecar.restarts
        time.sleep(0.5)
        assert sidecar.restarts == restarts == FAST.deaths_max  # one more death than the policy bears, then a rest
        started = time.monotonic()
    finally:
        sidecar.stop()
    assert time.monotonic() - started < 5  # a rest ends at once when the API stops


def test_a_sidecar_stopped_while_it_waits_to_restart_starts_nothing_more():
    slow = RestartPolicy(backoff_first=30, backoff_max=30, window=60, deaths_max=3)
    sidecar = _sidecar([sys.executable, "-c", "raise SystemExit(1)"], policy=slow)
    _wait_for(lambda: sidecar.process is not None and sidecar.process.poll() is not None, what="the first exit")
    time.sleep(0.3)  # it is in its 30 s backoff now
    started = time.monotonic()
    sidecar.stop()
    assert time.monotonic() - started < 5
    assert sidecar.restarts == 0 and sidecar.process is not None and sidecar.process.returncode == 1
