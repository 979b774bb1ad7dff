"""A batch worker whose database goes away mid-run exits with one line and the status that says "start me again",
not a traceback per poll: `serve` starts the next one, which waits for the database and takes back what the dead
one held (`api.batches.recovery`). On real parts: PostgreSQL behind a TCP proxy that is killed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psycopg
import pytest

from api.management.commands.batch_worker import DATABASE_LOST
from bench.server import database_for_run
from testbed.ports import free_port
from testbed.tcp_proxy import TcpProxy
from tests.batches.processes import stand_in_process
from tests.ops.helpers import ROOT, serve_env

pytestmark = pytest.mark.servers

POSTGRES = os.environ.get("OPENJEV_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _postgres_up() -> bool:
    try:
        psycopg.connect(POSTGRES, connect_timeout=3).close()
    except psycopg.Error:
        return False
    return True


def test_a_worker_that_loses_its_database_exits_with_one_line_to_be_started_again(tmp_path):
    assert _postgres_up(), f"PostgreSQL is not reachable at {POSTGRES} (scripts/test.sh starts it)"
    with database_for_run(POSTGRES) as direct, stand_in_process() as backend:
        name = direct.rsplit("/", 1)[1]
        env = serve_env(OPENJEV_DATABASE_URL=direct)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        proxy = TcpProxy(port=free_port(), upstream="127.0.0.1:5432", log_path=tmp_path / "proxy.log")
        proxy.start()
        log = (tmp_path / "worker.log").open("w+")
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "batch_worker", "--interval", "0.1"],
            cwd=ROOT,
            env=serve_env(
                OPENJEV_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{proxy.port}/{name}", OPENJEV_BACKEND_URL=backend
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while "Starting worker" not in (tmp_path / "worker.log").read_text():
                assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                time.sleep(0.1)
            proxy.kill()
            assert worker.wait(30) == DATABASE_LOST
        finally:
            worker.kill()
            proxy.kill()
        output = (tmp_path / "worker.log").read_text()
        assert "the batch worker lost its database" in output
        assert "Traceback" not in output, output
