"""`manage.py serve --workers N`: this process supervises N worker `serve`s on one port (`serving.workers`),
each serving the API itself, and stops them on a signal, SGLang's exit or a crash loop. Apart from the command
(`api/management/commands/serve.py`) so the single-process path and this one read side by side."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

from django.core.management.base import CommandError

from api.management.serve_sglang import sglang_exit_error
from serving.config import OpenJevConfig
from serving.servers import StopSignal
from serving.supervisor import exit_status, process_watch
from serving.workers import WorkerPool, restart_policy

log = logging.getLogger("openjev.serve")


def worker_argv(*, config: OpenJevConfig, options: dict[str, Any]) -> list[str]:
    """The command line of one worker `serve`: this one's listening and timing options, and the backend to connect
    to (a launched SGLang's URL)."""
    argv = [
        sys.executable,
        sys.argv[0],
        "serve",
        "--worker-process",
        "--host",
        options["host"],
        "--port",
        str(options["port"]),
        "--drain",
        str(options["drain"]),
        "--keep-alive",
        str(options["keep_alive"]),
        "--startup-timeout",
        str(options["startup_timeout"]),
    ]
    argv += ["--access-log"] if options["access_log"] else []
    argv += ["--connect", config.backend_url] if config.backend == "sglang" and config.backend_url else []
    return argv


def workers_run(
    *,
    config: OpenJevConfig,
    process: subprocess.Popen[bytes] | None,
    stop: StopSignal,
    count: int,
    options: dict[str, Any],
) -> None:
    """Supervise `count` worker `serve`s on this port, replacing the ones that die, until a signal,
    SGLang's exit or a crash loop (`serving.workers`)."""
    argv = worker_argv(config=config, options=options)
    pool = WorkerPool(argv=argv, count=count, grace=options["drain"] + 5, policy=restart_policy(count=count))
    if process is not None:
        process_watch(process=process, on_exit=lambda code: None if stop.stopping else pool.stop())
    stop.server = pool
    if stop.event.is_set():
        pool.stop()
    pool.run()
    if process is not None and process.poll() is not None and not stop.stopping:
        raise sglang_exit_error(returncode=process.returncode)
    if pool.failure is not None:
        raise CommandError(
            f"API workers died more than {pool.policy.deaths_max} times within {pool.policy.window:.0f} s; "
            "the others were stopped",
            returncode=exit_status(returncode=pool.failure),
        )
    log.info("API workers stopped")
