"""Running `manage.py serve` for real: a subprocess, its log, its exit status, and the fake SGLang python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import httpx

from testbed.ports import free_port
from testbed.qwen3 import qwen3_dir

ROOT = Path(__file__).resolve().parents[2]
FAKE_PYTHON_SCRIPT = Path(__file__).with_name("fake_sglang_python.py")


def fake_python_write(directory: Path) -> Path:
    """An executable that behaves like `/path/to/sglang-env/bin/python -m sglang.launch_server ...`."""
    path = directory / "sglang-python"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_PYTHON_SCRIPT}" "$@"\n')
    path.chmod(0o755)
    return path


def serve_env(**extra: str) -> dict[str, str]:
    """The environment of a served API: no stray OPENJEV_* from the caller, the offline Qwen3 tokenizer,
    storage off (no database needed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJEV_", "FAKE_SGLANG_"))}
    env |= {
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_STORE_EVALUATIONS": "off",
        "OPENJEV_SECRET_KEY": "tests-serve-secret-key-not-the-public-default",
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    return env | extra


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class Serve:
    """`manage.py serve ARGS` in a subprocess, its output in a log file."""

    def __init__(self, args: list[str], *, log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(self.port), *args],
            cwd=ROOT,
            env=env or serve_env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, timeout: float = 60.0) -> httpx.Response:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited with {self.process.returncode}:\n{self.log}")
            try:
                response = httpx.get(self.url + "/health", timeout=2)
                if response.status_code == 200:
                    return response
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"serve was not healthy after {timeout} s:\n{self.log}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve still running after {timeout} s:\n{self.log}") from None

    def terminate(self, timeout: float = 30.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._log.close()
