"""`manage.py serve` for real: subprocesses, signals, sockets, exit statuses, and no process left behind.

The "SGLang python" is `fake_sglang_python.py`: it records the argv it was launched with and serves
the fake SGLang on the requested port, or fails the way the test asks.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from serving.profiles import DEFAULT_PROFILE, PROFILES, sglang_command
from testbed.ports import free_port
from tests.conftest import README_REQUEST
from tests.ops.helpers import ROOT, Serve, fake_python_write, pid_alive, serve_env

pytestmark = pytest.mark.servers


def _wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


class Launch:
    """Paths and options of one `serve --sglang-python` run."""

    def __init__(
        self, tmp_path: Path, *, extra: list[str] | None = None, args: list[str] | None = None, **env: str
    ) -> None:
        self.python = fake_python_write(tmp_path)
        self.sglang_port = free_port()
        self.record = tmp_path / "record.json"
        self.child_pidfile = tmp_path / "child.pid"
        argv = [
            "--sglang-python",
            str(self.python),
            "--sglang-port",
            str(self.sglang_port),
            "--grace",
            "5",
            *(args or []),
        ]
        if extra:
            argv += ["--", *extra]
        self.serve = Serve(
            argv,
            log=tmp_path / "serve.log",
            env=serve_env(
                FAKE_SGLANG_RECORD=str(self.record), FAKE_SGLANG_CHILD_PIDFILE=str(self.child_pidfile), **env
            ),
        )

    def recorded(self) -> dict:
        return json.loads(_wait_for(self.record))

    def pids(self) -> tuple[int, int]:
        """The launched SGLang and its own child (like SGLang's scheduler processes)."""
        return self.recorded()["pid"], int(_wait_for(self.child_pidfile))


def _assert_gone(*pids: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if pid_alive(pid)], "a launched process outlived serve"


@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_serve_connect_answers_through_an_existing_sglang(fake, tmp_path, server):
    with Serve(["--connect", fake.url, "--server", server], log=tmp_path / "serve.log") as serve:
        health = serve.wait_healthy().json()
        assert health["status"] == "ok" and health["backend"] == "sglang" and health["startup_seconds"] > 0
        response = httpx.post(serve.url + "/v1/systemone", json=README_REQUEST, timeout=30)
        assert response.status_code == 200, response.text
        assert list(response.json()["answers"]) == ["refund", "team", "anger"]
        assert response.headers["x-openjev-model"] == "Qwen/Qwen3.6-35B-A3B"
        assert fake.generate_calls == 2  # batched: warm-up + one batch
        assert serve.terminate() == 0, serve.log
    assert f"with {server}" in serve.log


def test_serve_launches_sglang_with_the_profiles_command_line_and_stops_it_on_sigterm(tmp_path):
    launch = Launch(tmp_path, extra=["--enable-metrics", "--mem-fraction-static", "0.8"])
    with launch.serve as serve:
        serve.wait_healthy()
        record = launch.recorded()
        argv, env = sglang_command(
            profile=PROFILES[DEFAULT_PROFILE],
            python=str(launch.python),
            model="nvidia/Qwen3.6-35B-A3B-NVFP4",
            served_name="Qwen/Qwen3.6-35B-A3B",
            context_length=32768,
            port=launch.sglang_port,
            host="127.0.0.1",
            frontend="rust",
            extra_args=["--enable-metrics", "--mem-fraction-static", "0.8"],
        )
        assert record["argv"] == argv[1:]
        assert record["SGLANG_RUST_SERVER"] == env["SGLANG_RUST_SERVER"] == "1"
        assert record["pgid"] == record["pid"] == record["sid"] != record["parent_pgid"]  # its own group
        response = httpx.post(serve.url + "/v1/systemone", json=README_REQUEST, timeout=30)
        assert response.status_code == 200, response.text
        sglang, grandchild = launch.pids()
        assert serve.terminate() == 0, serve.log
    _assert_gone(sglang, grandchild)
    assert "API stopped" in serve.log and "exited with" not in serve.log


def test_profile_frontend_and_token_limit_shape_the_launched_command(tmp_path):
    launch = Launch(
        tmp_path,
        extra=["--enable-metrics"],
        args=["--profile", "qwen3-30b-a3b-gptq-int4"],
        OPENJEV_FRONTEND="python",
        OPENJEV_MAX_INPUT_TOKENS="16384",
        OPENJEV_REVISION="abc123",
    )
    with launch.serve as serve:
        serve.wait_healthy()
        record = launch.recorded()
        assert record["argv"] == [
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen3-30B-A3B-GPTQ-Int4",
            "--served-model-name",
            "Qwen/Qwen3-30B-A3B",
            "--context-length",
            "16384",
            "--host",
            "127.0.0.1",
            "--port",
            str(launch.sglang_port),
            "--revision",
            "abc123",
            "--tp-size",
            "1",
            "--mem-fraction-static",
            "0.85",
            "--enable-metrics",
        ]
        assert record["SGLANG_RUST_SERVER"] == "0"
        models = httpx.get(serve.url + "/v1/models", timeout=10).json()
        assert [m["name"] for m in models["models"]] == ["jev-latest", "Qwen/Qwen3-30B-A3B"]
        assert serve.terminate() == 0, serve.log


@pytest.mark.parametrize(("server", "code"), [("uvicorn", 0), ("uvicorn", 7), ("daphne", 7)])
def test_sglang_exiting_while_serving_makes_the_api_exit_non_zero(tmp_path, server, code):
    launch = Launch(tmp_path, args=["--server", server], FAKE_SGLANG_EXIT_ON_USR1=str(code))
    with launch.serve as serve:
        serve.wait_healthy()
        sglang, grandchild = launch.pids()
        os.kill(sglang, signal.SIGUSR1)
        status = serve.wait_exit()
        assert status == (code or 1), serve.log
        assert f"SGLang exited with status {code} while serving" in serve.log
        with pytest.raises(httpx.ConnectError):
            httpx.get(serve.url + "/health/live", timeout=2)
    _assert_gone(sglang, grandchild)  # the rest of its group is stopped too


def test_sglang_dying_during_startup_stops_serve_with_its_status(tmp_path):
    launch = Launch(tmp_path, FAKE_SGLANG_EXIT="7")
    with launch.serve as serve:
        assert serve.wait_exit() == 7, serve.log
        assert "SGLang exited with status 7; the API will not start without it" in serve.log
        assert "serving OpenJev" not in serve.log


def test_a_backend_that_never_becomes_healthy_times_out_and_is_stopped(tmp_path):
    launch = Launch(tmp_path, args=["--startup-timeout", "2"], FAKE_SGLANG_START_DELAY="120")
    with launch.serve as serve:
        assert serve.wait_exit() == 1, serve.log
        assert "was not healthy after 2 s" in serve.log
        sglang, grandchild = launch.pids()
    _assert_gone(sglang, grandchild)


def test_sigterm_while_sglang_loads_stops_both_and_exits_zero(tmp_path):
    launch = Launch(tmp_path, FAKE_SGLANG_START_DELAY="120")
    with launch.serve as serve:
        sglang, grandchild = launch.pids()
        assert serve.terminate() == 0, serve.log
        assert "stopped before the backend was ready" in serve.log
    _assert_gone(sglang, grandchild)


def test_a_wedged_sglang_is_killed_with_its_group_after_the_grace_period(tmp_path):
    launch = Launch(tmp_path, args=["--grace", "1"], FAKE_SGLANG_IGNORE_TERM="1")
    with launch.serve as serve:
        serve.wait_healthy()
        sglang, grandchild = launch.pids()
        started = time.monotonic()
        assert serve.terminate() == 0, serve.log
        assert time.monotonic() - started < 15
        assert "sending SIGKILL" in serve.log
    _assert_gone(sglang, grandchild)


def test_an_engine_that_cannot_start_stops_sglang_and_exits_non_zero(tmp_path):
    launch = Launch(tmp_path, OPENJEV_TOKENIZER=str(tmp_path / "no-tokenizer-here"))
    with launch.serve as serve:
        assert serve.wait_exit() == 1, serve.log
        assert "engine startup failed" in serve.log
        sglang, grandchild = launch.pids()
    _assert_gone(sglang, grandchild)


def test_flags_that_disable_the_radix_cache_are_refused_before_launching(tmp_path):
    launch = Launch(tmp_path, extra=["--disable-radix-cache"])
    with launch.serve as serve:
        assert serve.wait_exit() == 1, serve.log
        assert "radix" in serve.log
    assert not launch.record.exists()


def test_extra_sglang_arguments_need_a_launched_sglang(fake, tmp_path):
    with Serve(["--connect", fake.url, "--", "--enable-metrics"], log=tmp_path / "serve.log") as serve:
        assert serve.wait_exit() == 1
        assert "only apply with --sglang-python" in serve.log


def test_print_sglang_command_shows_the_worker_command_without_launching(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "serve",
            "--sglang-python",
            "python3",
            "--sglang-host",
            "0.0.0.0",
            "--print-sglang-command",
            "--",
            "--enable-metrics",
        ],
        cwd=ROOT,
        env=serve_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    profile = PROFILES[DEFAULT_PROFILE]
    argv, _ = sglang_command(
        profile=profile,
        python="python3",
        model=profile.weights,
        served_name=profile.model,
        context_length=32768,
        port=30000,
        host="0.0.0.0",
        frontend="rust",
        extra_args=["--enable-metrics"],
    )
    assert result.stdout.strip() == "SGLANG_RUST_SERVER=1 " + shlex.join(argv)


def test_serve_refuses_the_public_default_secret_key_before_anything_starts(tmp_path):
    env = {k: v for k, v in serve_env().items() if k != "OPENJEV_SECRET_KEY"}
    with Serve(
        ["--connect", f"http://u:backend-pass-1234@127.0.0.1:{free_port()}"], log=tmp_path / "serve.log", env=env
    ) as serve:
        assert serve.wait_exit(timeout=60) == 1
    assert "OPENJEV_SECRET_KEY is not set" in serve.log and "waiting for" not in serve.log


def test_serve_logs_the_backend_url_without_its_credentials(tmp_path):
    url = f"http://u:backend-pass-1234@127.0.0.1:{free_port()}"
    with Serve(["--connect", url, "--startup-timeout", "1"], log=tmp_path / "serve.log") as serve:
        assert serve.wait_exit(timeout=60) == 1
    assert "http://***@127.0.0.1" in serve.log and "backend-pass-1234" not in serve.log


def _worker_pids_answering(url: str, *, want: int, tries: int = 200) -> set[int]:
    """Worker pids seen on /health over fresh connections (SO_REUSEPORT spreads them by address)."""
    seen: set[int] = set()
    for _ in range(tries):
        seen.add(httpx.get(url + "/health", timeout=10).json()["worker_pid"])
        if len(seen) >= want:
            break
    return seen


def test_serve_with_two_workers_answers_from_two_processes_and_sigterm_stops_both(fake, tmp_path):
    with Serve(["--connect", fake.url, "--workers", "2"], log=tmp_path / "serve.log") as serve:
        serve.wait_healthy()
        pids = _worker_pids_answering(serve.url, want=2)
        assert len(pids) == 2 and serve.process.pid not in pids
        assert {int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in pids} == {
            serve.process.pid
        }  # both are children of the one serve
        response = httpx.post(serve.url + "/v1/systemone", json=README_REQUEST, timeout=30)
        assert response.status_code == 200, response.text
        assert serve.terminate() == 0, serve.log
        _assert_gone(*pids)
    assert "started 2 API workers" in serve.log


def _children(pid: int) -> list[int]:
    """The live API worker processes `pid` started (zombies, exited but not yet reaped, are left out; so is the
    batch worker `serve` runs beside them)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"--worker-process" in command:
            found.append(int(stat.parent.name))
    return sorted(found)


def _workers_reported(url: str) -> dict[str, int]:
    """What /health says of serve's workers (auth is off: every field is shown)."""
    return httpx.get(url + "/health", timeout=10).json()["workers"]


def test_a_killed_worker_is_replaced_while_the_other_answers(fake, tmp_path):
    with Serve(["--connect", fake.url, "--workers", "2"], log=tmp_path / "serve.log") as serve:
        serve.wait_healthy()
        first = _worker_pids_answering(serve.url, want=2)
        assert len(first) == 2
        dead = min(first)
        os.kill(dead, signal.SIGKILL)  # as the OOM killer does
        statuses: list[int | str] = []
        until = time.monotonic() + 10
        while time.monotonic() < until:  # a fresh connection each: the kernel spreads them over the workers
            try:
                statuses.append(httpx.post(serve.url + "/v1/systemone", json=README_REQUEST, timeout=10).status_code)
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)
            time.sleep(0.05)
        answered = sum(status == 200 for status in statuses)
        assert answered >= 0.9 * len(statuses), (statuses, serve.log)
        assert serve.process.poll() is None, serve.log

        deadline = time.monotonic() + 20
        while _workers_reported(serve.url) != {"up": 2, "configured": 2, "replaced": 1}:
            assert time.monotonic() < deadline, (_workers_reported(serve.url), serve.log)
            time.sleep(0.2)
        workers = _children(serve.process.pid)
        assert len(workers) == 2 and dead not in workers and len(set(workers) & first) == 1, (workers, first)
        (replacement,) = set(workers) - first
        answering: set[int] = set()
        while answering != set(workers):  # the replacement serves too, once its engine is built
            assert time.monotonic() < deadline + 30, (answering, workers, serve.log)
            answering |= _worker_pids_answering(serve.url, want=2)
        assert serve.terminate() == 0, serve.log
        _assert_gone(*workers)
    assert f"API worker {dead} exited with signal 9 (SIGKILL)" in serve.log
    assert f"API worker {replacement} started in place of {dead}" in serve.log


def test_workers_that_keep_dying_make_serve_give_up_and_exit_with_their_status(fake, tmp_path):
    with Serve(["--connect", fake.url, "--workers", "2"], log=tmp_path / "serve.log") as serve:
        serve.wait_healthy()
        assert _workers_reported(serve.url) == {"up": 2, "configured": 2, "replaced": 0}
        killed: set[int] = set()
        deadline = time.monotonic() + 60
        while serve.process.poll() is None:  # a crash loop: every worker dies as soon as it starts
            assert time.monotonic() < deadline, serve.log
            for pid in set(_children(serve.process.pid)) - killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.02)
        assert serve.wait_exit() == 128 + signal.SIGKILL, serve.log
        _assert_gone(*killed)
    assert len(killed) == 6, serve.log  # 5 deaths within 60 s are borne (2 workers), the 6th is not
    assert "giving up" in serve.log


def test_workers_above_one_need_uvicorn(fake, tmp_path):
    serve = Serve(["--connect", fake.url, "--workers", "2", "--server", "daphne"], log=tmp_path / "serve.log")
    with serve:
        assert serve.wait_exit() != 0
    assert "--workers above 1 needs --server uvicorn" in serve.log
