"""`manage.py serve`: the API under a production ASGI server, optionally supervising its own SGLang.

    manage.py serve --host 0.0.0.0 --port 8000 --connect http://gateway:30000
    manage.py serve --host 0.0.0.0 --sglang-python /opt/sglang/bin/python [-- extra SGLang arguments]
    manage.py serve                   # whatever OPENJEV_* says (the embedded llama.cpp backend by default)

Order of a start: launch SGLang (its own process group), wait until the backend is ready (a gateway's
`/readiness`, else SGLang's `/health`; up to `--startup-timeout`), load the tokenizer and validate the
labels, and only then open the API port,
so a load balancer or Modal never sees a port that answers before the model can. After that:

- SGLang exiting at any time, even with status 0, stops the API with a non-zero status that names
  the child's status: no API is left serving a dead backend;
- SIGTERM or SIGINT stop the API first (in-flight requests get `--drain` seconds), then SIGTERM
  SGLang's process group, SIGKILL after `--grace` seconds, and exit 0;
- with `--workers N`, a worker that dies is replaced while the others serve; only a crash loop stops
  the rest and exits non-zero (`serving.workers`).
- the batch worker beside the API (the `database` task engine) is started again when it dies, with
  the same backoff; a crash loop of it is logged and rests, the API serving on (`serving.sidecar`).

The ASGI server runs in this process (`serving.servers`: uvicorn by default, `--server daphne` is
supported), so signals, exit statuses and the evaluator are all in one place.

Options that change the configuration (`--connect`, `--sglang-python`, `--profile`: `serving.options`)
become `OPENJEV_*` variables before the settings load (`manage.py` applies them), so they win over the
environment and defaults that depend on them (the model from the profile, the backend from the URL)
follow, and a launched SGLang sees the same values; started another way (`django-admin serve`), the
command re-executes itself with them before anything starts.

The steps live beside the command, in `api/management/`: what a start checks (`serve_start.py`), SGLang launched,
waited for and stopped (`serve_sglang.py`), the API served in this process (`serve_api.py`) or by workers
(`serve_workers.py`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from api.management.serve_api import api_serve
from api.management.serve_sglang import (
    backend_ready_wait,
    sglang_command_built,
    sglang_command_shown,
    sglang_stop,
)
from api.management.serve_start import backend_source, environment_reexec, secret_key_refused, workers_refused
from api.management.serve_workers import workers_run
from serving.config import OpenJevConfig
from serving.options import source_arguments_add, source_environment
from serving.servers import DEFAULT_SERVER, SERVERS, StopSignal
from serving.sidecar import Sidecar
from serving.supervisor import parent_death_signal, process_launch
from serving.workers import restart_policy, workers_count


class Command(BaseCommand):
    help = "Serve the API in production: an ASGI server, connected to or supervising SGLang."
    batch_worker: Sidecar | None = None

    def run_from_argv(self, argv: list[str]) -> None:
        """`serve [options] -- ARGS`: everything after `--` goes to SGLang untouched."""
        if "--" in argv:
            cut = argv.index("--")
            argv = [*argv[:cut], *(f"--sglang-arg={arg}" for arg in argv[cut + 1 :])]
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address the API listens on (0.0.0.0 in containers)")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--server",
            choices=SERVERS,
            default=DEFAULT_SERVER,
            help=f"ASGI server (default {DEFAULT_SERVER}, the faster on bench/server.py)",
        )
        source_arguments_add(parser=parser)
        parser.add_argument(
            "--sglang-arg",
            dest="sglang_args",
            action="append",
            default=[],
            metavar="ARG",
            help="one extra SGLang argument (repeatable); or put them all after --",
        )
        parser.add_argument(
            "--startup-timeout",
            type=float,
            default=1800.0,
            help="seconds to wait for the backend's /health (first start downloads weights)",
        )
        parser.add_argument(
            "--grace", type=float, default=30.0, help="seconds SGLang's process group gets after SIGTERM before SIGKILL"
        )
        parser.add_argument(
            "--drain", type=float, default=30.0, help="seconds in-flight requests get to finish on shutdown"
        )
        parser.add_argument(
            "--keep-alive",
            type=int,
            default=75,
            help="idle keep-alive seconds; keep it above the load balancer's idle timeout",
        )
        parser.add_argument("--access-log", action="store_true", help="log every request (costs CPU)")
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            metavar="N",
            help="API processes on the one port (uvicorn), each with its own admission limit and "
            "backend connection pool; 0 = one per core (default 1)",
        )
        parser.add_argument("--worker-process", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument("--migrate", action="store_true", help="apply database migrations before serving")
        parser.add_argument(
            "--print-sglang-command",
            action="store_true",
            help="print the SGLang command --sglang-python would launch, and exit (for workers "
            "started elsewhere, e.g. behind a gateway)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        config = settings.OPENJEV
        sglang_python, connect = backend_source(config=config, options=options)
        environment_reexec(
            overrides=source_environment(
                connect=connect,
                sglang_python=sglang_python,
                profile=options["profile"],
                sglang_host=options["sglang_host"],
                sglang_port=options["sglang_port"],
            )
        )
        workers_refused(options=options)
        stop = StopSignal()
        stop.install()
        secret_key_refused(config=config, options=options)
        if options["migrate"] and not options["print_sglang_command"]:
            call_command("migrate", interactive=False, verbosity=0)

        process: subprocess.Popen[bytes] | None = None
        if sglang_python:
            argv, env = sglang_command_built(config=config, python=sglang_python, options=options)
            if options["print_sglang_command"]:
                self.stdout.write(sglang_command_shown(argv=argv, env=env))
                return
            process = process_launch(argv=argv, env=env, preexec=parent_death_signal())
        elif options["print_sglang_command"]:
            raise CommandError("--print-sglang-command needs --sglang-python (the interpreter that has SGLang)")
        try:
            self._serve(config=config, process=process, stop=stop, started=started, options=options)
        finally:
            stop.stopping = True
            self._batch_worker_stop()
            if process is not None:
                sglang_stop(process=process, grace=options["grace"])

    def _serve(
        self,
        *,
        config: OpenJevConfig,
        process: subprocess.Popen[bytes] | None,
        stop: StopSignal,
        started: float,
        options: dict[str, Any],
    ) -> None:
        """Wait for the backend, then serve until a signal or SGLang's exit: in this process, or in workers."""
        sglang_url = config.backend == "sglang" and config.backend_url
        if sglang_url and not backend_ready_wait(config=config, process=process, stop=stop, options=options):
            return
        self._batch_worker_start(config=config, options=options)
        workers = 1 if options["worker_process"] else workers_count(requested=options["workers"])
        if workers > 1:
            workers_run(config=config, process=process, stop=stop, count=workers, options=options)
            return
        api_serve(config=config, process=process, stop=stop, started=started, options=options)

    def _batch_worker_start(self, *, config: OpenJevConfig, options: dict[str, Any]) -> None:
        """The batch jobs' worker (`manage.py batch_worker`) beside the API, once the backend is ready, when the
        database engine queues them and `OPENJEV_BATCH_WORKER` is on: a process of its own (its evaluator, its
        event loop), started again when it dies (`serving.sidecar`), told to stop with the API and, should `serve`
        be killed, by the kernel."""
        if config.task_engine != "database" or not config.batch_worker or options["worker_process"]:
            return
        argv = [sys.executable, sys.argv[0], "batch_worker", "--no-startup-delay", "--interval", "0.5"]
        self.batch_worker = Sidecar(
            argv=argv, name="batch worker", policy=restart_policy(count=1), grace=options["drain"]
        )
        self.batch_worker.start()

    def _batch_worker_stop(self) -> None:
        if self.batch_worker is not None:
            self.batch_worker.stop()
