"""The supervisor's pieces with real processes: own process group, group stop, health wait, statuses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from serving.supervisor import (
    ChildExited,
    StartupCancelled,
    StartupTimeout,
    exit_status,
    health_wait,
    process_group_stop,
    process_launch,
    process_watch,
    returncode_describe,
)
from testbed.ports import free_port
from tests.ops.helpers import pid_alive

# A leader that starts a grandchild in its group, writes its pid to a file, then waits (optionally deaf
# to SIGTERM, like a wedged server).
LEADER = """
import pathlib, signal, subprocess, sys, time
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "600"])
pathlib.Path(sys.argv[1]).write_text(str(child.pid))
time.sleep(600)
"""


def _leader(tmp_path: Path, mode: str = "normal") -> tuple[subprocess.Popen[bytes], int]:
    pidfile = tmp_path / "grandchild.pid"
    process = process_launch(argv=[sys.executable, "-c", LEADER, str(pidfile), mode])
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return process, int(pidfile.read_text())


def test_launch_puts_the_child_in_its_own_process_group():
    process = process_launch(argv=[sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert os.getpgid(process.pid) == process.pid != os.getpgid(0)
        assert os.getsid(process.pid) == process.pid
    finally:
        assert process_group_stop(process=process, grace=5) == -signal.SIGTERM


def test_group_stop_takes_the_grandchildren_too(tmp_path):
    process, grandchild = _leader(tmp_path)
    assert pid_alive(grandchild)
    started = time.monotonic()
    process_group_stop(process=process, grace=5)
    assert time.monotonic() - started < 5
    assert not pid_alive(process.pid) and not pid_alive(grandchild)


def test_a_leader_deaf_to_sigterm_is_killed_after_the_grace_period(tmp_path):
    process, grandchild = _leader(tmp_path, "deaf")
    time.sleep(0.3)  # let it install its handler
    started = time.monotonic()
    assert process_group_stop(process=process, grace=0.5) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 10
    assert not pid_alive(grandchild)


def test_health_wait_stops_at_once_when_the_child_exits():
    process = process_launch(argv=[sys.executable, "-c", "import sys; sys.exit(7)"])
    started = time.monotonic()
    with pytest.raises(ChildExited, match="status 7") as exited:
        health_wait(url=f"http://127.0.0.1:{free_port()}/health", process=process, timeout=60, interval=0.05)
    assert exited.value.returncode == 7 and time.monotonic() - started < 10


def test_health_wait_times_out_and_can_be_cancelled():
    url = f"http://127.0.0.1:{free_port()}/health"
    with pytest.raises(StartupTimeout, match="not healthy after"):
        health_wait(url=url, process=None, timeout=0.3, interval=0.05)
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    with pytest.raises(StartupCancelled):
        health_wait(url=url, process=None, timeout=60, interval=0.05, stop=stop)


def test_health_wait_returns_once_the_server_answers(fake):
    fake.healthy = False
    threading.Timer(0.3, lambda: setattr(fake, "healthy", True)).start()
    assert health_wait(url=f"{fake.url}/health", process=None, timeout=10, interval=0.05) >= 0.2


def test_health_wait_falls_back_from_readiness_on_a_server_without_it(fake):
    fake.api_key = "sekrit"  # /readiness: 401 from the key middleware, like 404 without one
    fake.healthy = False
    threading.Timer(0.3, lambda: setattr(fake, "healthy", True)).start()
    assert (
        health_wait(
            url=f"{fake.url}/readiness", fallback_url=f"{fake.url}/health", process=None, timeout=10, interval=0.05
        )
        >= 0.2
    )


def test_watch_reports_the_exit_status():
    process = process_launch(argv=[sys.executable, "-c", "import sys; sys.exit(3)"])
    seen: list[int] = []
    process_watch(process=process, on_exit=seen.append).join(10)
    assert seen == [3]


@pytest.mark.parametrize(
    ("returncode", "status", "text"), [(7, 7, "status 7"), (0, 1, "status 0"), (-9, 137, "signal 9 (SIGKILL)")]
)
def test_the_api_never_exits_zero_for_a_dead_child(returncode, status, text):
    assert exit_status(returncode=returncode) == status
    assert returncode_describe(returncode=returncode) == text
