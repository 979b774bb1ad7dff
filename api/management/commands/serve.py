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
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.module_loading import import_string

from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_body
from api.plumbing.json_render import body_encode
from api.systemone.stream_protocol import stream_transport_limit
from audit.storage.store import storage_start
from inference.backends.sglang import HEALTH_PATH, READINESS_PATH
from inference.errors import StartupError
from serving.collector import collector_tune
from serving.config import DEFAULT_SECRET_KEY, OpenJevConfig
from serving.config_reading import config_from_env
from serving.evaluator import evaluator_build, evaluator_install, startup_error_message
from serving.options import source_arguments_add, source_environment
from serving.profiles import profile_get, sglang_command
from serving.redaction import text_redact
from serving.servers import DEFAULT_SERVER, SERVERS, ServerFailed, ServerOptions, StopSignal, server_create
from serving.setting_rules import ConfigError
from serving.sidecar import Sidecar
from serving.supervisor import (
    ChildExited,
    StartupCancelled,
    SupervisorError,
    exit_status,
    health_wait,
    parent_death_signal,
    process_group_stop,
    process_launch,
    process_watch,
    returncode_describe,
)
from serving.workers import WorkerPool, restart_policy, workers_count

log = logging.getLogger("openjev.serve")


def environment_reexec(*, overrides: dict[str, str]) -> None:
    """Run this command again with `overrides` in its environment, unless it already has them; a bad
    value stops here, with the message naming the variable."""
    if all(os.environ.get(name) == value for name, value in overrides.items()):
        return
    env = {**os.environ, **overrides}
    try:
        config_from_env(env)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def server_options(*, config: OpenJevConfig, options: dict[str, Any]) -> ServerOptions:
    """The ASGI server's options: the command line's, and the header deadline with its 408 in the API's shape."""
    late = ApiError(408, "request_timeout", f"the request headers did not arrive within {config.header_timeout:g} s")
    return ServerOptions(
        host=options["host"],
        port=options["port"],
        drain=options["drain"],
        keep_alive=options["keep_alive"],
        access_log=options["access_log"],
        header_timeout=config.header_timeout,
        header_timeout_body=body_encode(body=error_body(late)),
        websocket_max_bytes=stream_transport_limit(max_body_bytes=config.max_body_bytes),
    )


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
        sglang_python = options["sglang_python"] or (None if options["connect"] else config.sglang_python)
        connect = options["connect"] or (None if sglang_python else config.backend_url)
        extra: list[str] = options["sglang_args"]
        if extra and not sglang_python:
            raise CommandError("extra SGLang arguments only apply with --sglang-python")
        environment_reexec(
            overrides=source_environment(
                connect=connect,
                sglang_python=sglang_python,
                profile=options["profile"],
                sglang_host=options["sglang_host"],
                sglang_port=options["sglang_port"],
            )
        )
        if options["workers"] < 0:
            raise CommandError("--workers must be 0 (one per core) or more")
        if workers_count(requested=options["workers"]) > 1 and options["server"] != "uvicorn":
            raise CommandError(
                "--workers above 1 needs --server uvicorn (each worker binds the port with SO_REUSEPORT)"
            )
        stop = StopSignal()
        stop.install()
        if config.secret_key == DEFAULT_SECRET_KEY and not config.debug and not options["print_sglang_command"]:
            raise CommandError(
                "OPENJEV_SECRET_KEY is not set: serve will not run with the public development key "
                "(it signs admin sessions). Set it to a long random value, the same on every replica, "
                "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
            )
        if options["migrate"] and not options["print_sglang_command"]:
            call_command("migrate", interactive=False, verbosity=0)

        process: subprocess.Popen[bytes] | None = None
        if sglang_python:
            try:
                profile = profile_get(name=config.profile)
                argv, env = sglang_command(
                    profile=profile,
                    python=sglang_python,
                    model=config.model_path or profile.weights,
                    served_name=config.served_model_name,
                    context_length=config.max_input_tokens,
                    port=options["sglang_port"],
                    host=options["sglang_host"],
                    frontend=config.frontend,
                    extra_args=extra,
                    revision=config.revision,
                )
            except StartupError as exc:
                raise CommandError(str(exc)) from None
            if options["print_sglang_command"]:
                self.stdout.write(" ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv)]))
                return
            process = process_launch(argv=argv, env=env, preexec=parent_death_signal())
        elif options["print_sglang_command"]:
            raise CommandError("--print-sglang-command needs --sglang-python (the interpreter that has SGLang)")
        try:
            self._serve(config=config, process=process, stop=stop, started=started, options=options)
        finally:
            stop.stopping = True
            self._batch_worker_stop()
            if process is not None:  # also after a crash: the rest of its group may still hold the GPU
                if process.returncode is None:
                    log.info("stopping SGLang (process group %d, %.0f s grace)", process.pid, options["grace"])
                process_group_stop(process=process, grace=options["grace"])

    def _serve(
        self,
        *,
        config: OpenJevConfig,
        process: subprocess.Popen[bytes] | None,
        stop: StopSignal,
        started: float,
        options: dict[str, Any],
    ) -> None:
        """Wait for the backend, build the evaluator, then serve until a signal or SGLang's exit."""
        if config.backend == "sglang" and config.backend_url:
            log.info("waiting for %s to be ready (up to %.0f s)", config.backend_url, options["startup_timeout"])
            try:
                waited = health_wait(
                    url=f"{config.backend_url}{READINESS_PATH}",
                    process=process,
                    timeout=options["startup_timeout"],
                    stop=stop.event,
                    fallback_url=f"{config.backend_url}{HEALTH_PATH}",
                )
            except StartupCancelled:
                log.info("stopped before the backend was ready")
                return
            except ChildExited as exc:
                raise CommandError(
                    f"{exc}; the API will not start without it", returncode=exit_status(returncode=exc.returncode)
                ) from None
            except SupervisorError as exc:
                raise CommandError(text_redact(text=str(exc), secrets=config.secrets)) from None
            log.info("backend healthy after %.1f s", waited)
        self._batch_worker_start(config=config, options=options)
        workers = 1 if options["worker_process"] else workers_count(requested=options["workers"])
        if workers > 1:
            self._workers_run(config=config, process=process, stop=stop, count=workers, options=options)
            return
        try:
            evaluator = evaluator_build(config=config)
        except Exception as exc:
            raise CommandError(
                text_redact(text=f"engine startup failed: {startup_error_message(exc)}", secrets=config.secrets)
            ) from None
        if stop.event.is_set():
            return
        startup_seconds = time.monotonic() - started
        evaluator_install(evaluator, startup_seconds=startup_seconds)
        storage_start()
        # The project's ASGI application, named by its settings (the app does not import the project).
        server = server_create(
            kind=options["server"],
            app=import_string(settings.ASGI_APPLICATION),
            options=replace(server_options(config=config, options=options), reuse_port=options["worker_process"]),
        )
        child_status: list[int] = []
        if process is not None:

            def on_exit(returncode: int) -> None:
                if stop.stopping:
                    return
                child_status.append(returncode)
                log.error("SGLang exited with %s: stopping the API", returncode_describe(returncode=returncode))
                server.stop()

            process_watch(process=process, on_exit=on_exit)
        log.info(
            "serving %s on %s:%d with %s (%s backend, model %s), ready after %.1f s",
            "OpenJev",
            options["host"],
            options["port"],
            options["server"],
            evaluator.backend.kind,
            evaluator.backend.model,
            startup_seconds,
        )
        stop.server = server
        collector_tune()  # after the application is imported: everything loaded so far lives as long as we do
        if stop.event.is_set():  # a signal arrived while the evaluator was being built
            server.stop()
        try:
            server.run()
        except ServerFailed as exc:
            raise CommandError(str(exc)) from None
        if child_status:
            code = child_status[0]
            raise CommandError(
                f"SGLang exited with {returncode_describe(returncode=code)} while serving; the API stopped with it",
                returncode=exit_status(returncode=code),
            )
        log.info("API stopped")

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

    def _workers_run(
        self,
        *,
        config: OpenJevConfig,
        process: subprocess.Popen[bytes] | None,
        stop: StopSignal,
        count: int,
        options: dict[str, Any],
    ) -> None:
        """Supervise `count` worker `serve`s on this port, replacing the ones that die, until a signal,
        SGLang's exit or a crash loop (`serving.workers`)."""
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
        pool = WorkerPool(argv=argv, count=count, grace=options["drain"] + 5, policy=restart_policy(count=count))
        if process is not None:
            process_watch(process=process, on_exit=lambda code: None if stop.stopping else pool.stop())
        stop.server = pool
        if stop.event.is_set():
            pool.stop()
        pool.run()
        if process is not None and process.poll() is not None and not stop.stopping:
            code = process.returncode
            raise CommandError(
                f"SGLang exited with {returncode_describe(returncode=code)} while serving; the API stopped with it",
                returncode=exit_status(returncode=code),
            )
        if pool.failure is not None:
            raise CommandError(
                f"API workers died more than {pool.policy.deaths_max} times within {pool.policy.window:.0f} s; "
                "the others were stopped",
                returncode=exit_status(returncode=pool.failure),
            )
        log.info("API workers stopped")
