"""`WorkerPool` with cheap workers (`python -c` that sleeps or exits): replacement, backoff, giving up,
stopping, and the state file its workers read. No timing assertion beyond generous bounds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from serving.supervisor import process_launch
from serving.workers import (
    SINGLE_PROCESS,
    WORKERS_STATE_ENV,
    RestartPolicy,
    WorkerPool,
    WorkersState,
    restart_delay,
    restart_policy,
    workers_state_current,
    workers_state_read,
    workers_state_write,
)
from tests.ops.helpers import pid_alive

# A worker that writes its pid and the state file's path to a file named by its pid, then sleeps.
SLEEPER = """
import os, pathlib, sys, time
pathlib.Path(sys.argv[1], str(os.getpid())).write_text(os.environ["OPENJEV_WORKERS_STATE"])
time.sleep(600)
"""
FAST = RestartPolicy(backoff_first=0.01, backoff_max=0.05, window=60, deaths_max=5)


def _wait_for(predicate: Callable[[], bool], *, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.02)


class Running:
    """A pool run in a thread of its own (as serve's main thread would), the pids it reported dead."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.exited: list[int] = []
        self.error: BaseException | None = None
        pool.on_worker_exit = self.exited.append
        self.thread = threading.Thread(target=self._run, name="pool", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.pool.run()
        except BaseException as exc:  # what serve's main thread would get
            self.error = exc

    def join(self, timeout: float = 60.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the pool did not return"


def _started(directory: Path) -> list[int]:
    return sorted(int(path.name) for path in directory.iterdir())


def _sleepers(tmp_path: Path, *, count: int, policy: RestartPolicy = FAST) -> tuple[Running, Path]:
    started = tmp_path / "started"
    started.mkdir()
    pool = WorkerPool(argv=[sys.executable, "-c", SLEEPER, str(started)], count=count, grace=5, policy=policy)
    running = Running(pool)
    _wait_for(lambda: len(_started(started)) == count, what=f"{count} workers starting")
    return running, started


def test_the_backoff_doubles_with_each_death_of_a_slot_up_to_its_cap():
    policy = RestartPolicy(backoff_first=0.5, backoff_max=10.0)
    assert [restart_delay(policy=policy, deaths=n) for n in range(1, 8)] == [0.5, 1, 2, 4, 8, 10, 10]


def test_serve_bears_five_deaths_a_minute_or_two_per_worker_if_that_is_more():
    assert (restart_policy(count=2).deaths_max, restart_policy(count=8).deaths_max) == (5, 16)
    assert restart_policy(count=2).window == 60 and restart_policy(count=2).backoff_first == 0.5


def test_a_killed_worker_is_replaced_and_the_others_keep_running(tmp_path):
    running, started = _sleepers(tmp_path, count=2)
    first = _started(started)
    state = Path((started / str(first[0])).read_text())
    assert workers_state_read(path=state) == WorkersState(up=2, configured=2, replaced=0)
    os.kill(first[0], signal.SIGKILL)
    _wait_for(lambda: len(_started(started)) == 3, what="a replacement starting")
    (replacement,) = set(_started(started)) - set(first)
    assert pid_alive(first[1]) and pid_alive(replacement)
    assert (started / str(replacement)).read_text() == str(state)  # it reads the same state file
    _wait_for(lambda: workers_state_read(path=state) == WorkersState(up=2, configured=2, replaced=1), what="state")
    assert running.exited == [first[0]]  # the hook saw the dead pid before the replacement ran
    running.pool.stop()
    running.join()
    assert running.pool.failure is None and running.pool.replaced == 1
    assert sorted(running.exited) == sorted([*first, replacement])
    assert not any(pid_alive(pid) for pid in [*first, replacement])
    assert not state.parent.exists()  # the state file goes with the pool


def test_stopping_stops_every_worker_and_replaces_none(tmp_path, caplog):
    running, started = _sleepers(tmp_path, count=3)
    pids = _started(started)
    running.pool.stop()  # each worker exits on its SIGTERM: exits the pool asked for
    running.join()
    assert not any(pid_alive(pid) for pid in pids)
    assert _started(started) == pids and running.pool.replaced == 0 and running.pool.failure is None
    assert sorted(running.exited) == pids
    assert "replacing" not in caplog.text


def test_a_replacement_that_cannot_start_stops_the_others(tmp_path, monkeypatch):
    launched: list[int] = []

    def launch_twice(**kwargs: Any) -> subprocess.Popen[bytes]:
        if len(launched) == 2:
            raise OSError(12, "Cannot allocate memory")
        launched.append(1)
        return process_launch(**kwargs)

    monkeypatch.setattr("serving.workers.process_launch", launch_twice)
    running, started = _sleepers(tmp_path, count=2)
    first = _started(started)
    os.kill(first[0], signal.SIGKILL)
    running.join()
    assert isinstance(running.error, OSError)  # serve exits non-zero with it
    assert not pid_alive(first[1]) and sorted(running.exited) == first


def test_a_crash_loop_makes_the_pool_give_up_with_the_last_status(tmp_path, caplog):
    caplog.set_level("INFO", logger="openjev.serve")
    pool = WorkerPool(argv=[sys.executable, "-c", "raise SystemExit(3)"], count=2, grace=5, policy=FAST)
    running = Running(pool)
    running.join()
    assert pool.failure == 3
    assert 4 <= pool.replaced <= 5  # deaths 1 to 5 were each replaced, unless the 6th came first
    assert len(running.exited) == pool.replaced + 2  # every worker started has exited, none left
    assert "API worker" in caplog.text and "exited with status 3: replacing it in" in caplog.text
    assert "6 worker deaths within 60 s (at most 5 are replaced): giving up" in caplog.text


def test_deaths_older_than_the_window_are_forgiven(tmp_path):
    # Each worker lives half a second, so no window of 0.3 s ever holds more than the two slots' deaths.
    policy = RestartPolicy(backoff_first=0.01, backoff_max=0.05, window=0.3, deaths_max=2)
    pool = WorkerPool(argv=[sys.executable, "-c", "import time; time.sleep(0.5)"], count=2, grace=5, policy=policy)
    running = Running(pool)
    _wait_for(lambda: pool.replaced >= 6, what="six replacements")
    pool.stop()
    running.join()
    assert pool.failure is None


def test_the_state_file_is_replaced_whole_and_unreadable_means_unknown(tmp_path):
    path = tmp_path / "state.json"
    assert workers_state_read(path=path) is None
    workers_state_write(path=path, state=WorkersState(up=1, configured=2, replaced=3))
    assert json.loads(path.read_text()) == {"up": 1, "configured": 2, "replaced": 3}
    assert workers_state_read(path=path) == WorkersState(up=1, configured=2, replaced=3)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    path.write_text('{"up": 1')
    assert workers_state_read(path=path) is None


def test_a_process_outside_a_pool_reports_itself_alone():
    assert WorkersState(up=1, configured=1, replaced=0) == SINGLE_PROCESS
    assert workers_state_current(environ={}) == workers_state_current(environ={WORKERS_STATE_ENV: ""}) == SINGLE_PROCESS


def test_a_worker_reads_its_pools_state_file(tmp_path):
    path = tmp_path / "state.json"
    environ = {WORKERS_STATE_ENV: str(path)}
    assert workers_state_current(environ=environ) is None  # gone: the pool is stopping
    workers_state_write(path=path, state=WorkersState(up=1, configured=2, replaced=1))
    assert workers_state_current(environ=environ) == WorkersState(up=1, configured=2, replaced=1)
