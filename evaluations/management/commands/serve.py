"""`manage.py serve`: the API under a production ASGI server, optionally supervising its own SGLang.

    manage.py serve --host 0.0.0.0 --port 8000 --connect http://gateway:30000
    manage.py serve --host 0.0.0.0 --sglang-python /opt/sglang/bin/python [-- extra SGLang arguments]
    manage.py serve                   # whatever OPENJEV_* says (the embedded engine by default)

Order of a start: launch SGLang (its own process group), wait until the backend is ready (a gateway's
`/readiness`, else SGLang's `/health`; up to `--startup-timeout`), load the tokenizer and validate the
labels, and only then open the API port,
so a load balancer or Modal never sees a port that answers before the model can. After that:

- SGLang exiting at any time, even with status 0, stops the API with a non-zero status that names
  the child's status: no API is left serving a dead backend;
- SIGTERM or SIGINT stop the API first (in-flight requests get `--drain` seconds), then SIGTERM
  SGLang's process group, SIGKILL after `--grace` seconds, and exit 0.

The ASGI server runs in this process (uvicorn by default: `bench/server.py` measured it ahead of
daphne on the API's workloads, see docs/operations.md; `--server daphne` is supported), so signals,
exit statuses and the engine are all in one place.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.engine import engine_build, engine_install, startup_error_message
from evaluations.stream import stream_transport_limit
from inference.backends.sglang import HEALTH_PATH, READINESS_PATH
from inference.errors import StartupError
from inference.profiles import profile_get, sglang_command
from inference.supervisor import (
    ChildExited,
    StartupCancelled,
    SupervisorError,
    exit_status,
    health_wait,
    process_group_stop,
    process_launch,
    process_watch,
    returncode_describe,
)
from openjev_site.config import DEFAULT_SECRET_KEY, ConfigError, OpenJevConfig, config_from_env
from openjev_site.redaction import text_redact

log = logging.getLogger("openjev.serve")

SERVERS = ("uvicorn", "daphne")
DEFAULT_SERVER = "uvicorn"


class _Server(Protocol):
    def run(self) -> None:
        """Serve until stopped; returns after a graceful shutdown."""
        ...

    def stop(self) -> None:
        """Ask the server to shut down; safe from any thread, before or during `run`."""
        ...


class _Uvicorn:
    def __init__(self, *, app: Any, host: str, port: int, drain: float, keep_alive: int, access_log: bool) -> None:
        import uvicorn

        from openjev_site.header_timeout import h11_protocol_with_header_timeout

        # log_config=None: keep Django's LOGGING; lifespan off: the engine is built before serving.
        config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_config=None, access_log=access_log,
                                timeout_graceful_shutdown=max(1, round(drain)), timeout_keep_alive=keep_alive,
                                server_header=False, proxy_headers=True,
                                http=h11_protocol_with_header_timeout(seconds=settings.OPENJEV.header_timeout),
                                ws_max_size=stream_transport_limit(max_body_bytes=settings.OPENJEV.max_body_bytes))
        self._server = uvicorn.Server(config)

    def run(self) -> None:
        self._server.run()

    def stop(self) -> None:
        self._server.should_exit = True


class _Daphne:
    def __init__(self, *, app: Any, host: str, port: int, drain: float, keep_alive: int, access_log: bool) -> None:
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        limit = stream_transport_limit(max_body_bytes=settings.OPENJEV.max_body_bytes)
        self._server = Server(application=app, endpoints=build_endpoint_description_strings(host=host, port=port),
                              signal_handlers=True, application_close_timeout=drain,
                              action_logger=_daphne_access_log if access_log else None, verbosity=1,
                              websocket_max_message_size=limit, websocket_max_frame_size=limit)

    def run(self) -> None:
        self._server.run()
        if not self._server.listening_addresses and not self._server.abort_start:
            raise CommandError("daphne could not listen (is the port already in use?)")

    def stop(self) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(self._server.stop)  # type: ignore[attr-defined]


def _daphne_access_log(protocol: str, action: str, details: dict[str, Any]) -> None:
    log.info("%s %s %s %s", details.get("client"), details.get("method"), details.get("path"), details.get("status"))


def server_create(*, kind: str, **options: Any) -> _Server:
    """The in-process ASGI server for `kind` around the site's application."""
    from openjev_site.asgi import application

    return (_Daphne if kind == "daphne" else _Uvicorn)(app=application, **options)


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec hook asking Linux to SIGTERM the child if this process dies without stopping it
    (SIGKILL, OOM): an orphaned SGLang would hold the GPU and the port for the next start."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return None

    def hook() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return hook


class _Stop:
    """SIGTERM/SIGINT outside the ASGI server's own handlers: during startup they cancel the wait,
    once a server exists they stop it (closing the gap before the server installs its handlers)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.server: _Server | None = None
        self.stopping = False
        """Set once this process stops SGLang itself: its exit is then expected, not a failure."""

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()
        if self.server is not None:
            self.server.stop()


def env_apply(*, overrides: dict[str, str]) -> None:
    """Put `overrides` in the environment and re-read the configuration from it, so defaults that
    depend on them (the model from the profile, the backend from the URL) follow, and a launched
    SGLang or any child sees the same values."""
    os.environ.update(overrides)
    try:
        settings.OPENJEV = config_from_env()
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


class Command(BaseCommand):
    help = "Serve the API in production: an ASGI server, connected to or supervising SGLang."

    def run_from_argv(self, argv: list[str]) -> None:
        """`serve [options] -- ARGS`: everything after `--` goes to SGLang untouched."""
        if "--" in argv:
            cut = argv.index("--")
            argv = [*argv[:cut], *(f"--sglang-arg={arg}" for arg in argv[cut + 1:])]
        super().run_from_argv(argv)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address the API listens on (0.0.0.0 in containers)")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--server", choices=SERVERS, default=DEFAULT_SERVER,
                            help=f"ASGI server (default {DEFAULT_SERVER}, the faster on bench/server.py)")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--connect", metavar="URL", help="use an existing SGLang server or gateway at URL")
        source.add_argument("--sglang-python", metavar="PATH",
                            help="launch SGLang with this Python interpreter (default: OPENJEV_SGLANG_PYTHON)")
        parser.add_argument("--profile", help="SGLang launch profile (default: OPENJEV_PROFILE)")
        parser.add_argument("--sglang-host", default="127.0.0.1", help="address a launched SGLang listens on")
        parser.add_argument("--sglang-port", type=int, default=30000, help="port of a launched SGLang")
        parser.add_argument("--sglang-arg", dest="sglang_args", action="append", default=[], metavar="ARG",
                            help="one extra SGLang argument (repeatable); or put them all after --")
        parser.add_argument("--startup-timeout", type=float, default=1800.0,
                            help="seconds to wait for the backend's /health (first start downloads weights)")
        parser.add_argument("--grace", type=float, default=30.0,
                            help="seconds SGLang's process group gets after SIGTERM before SIGKILL")
        parser.add_argument("--drain", type=float, default=30.0,
                            help="seconds in-flight requests get to finish on shutdown")
        parser.add_argument("--keep-alive", type=int, default=75,
                            help="idle keep-alive seconds; keep it above the load balancer's idle timeout")
        parser.add_argument("--access-log", action="store_true", help="log every request (costs CPU)")
        parser.add_argument("--migrate", action="store_true", help="apply database migrations before serving")
        parser.add_argument("--print-sglang-command", action="store_true",
                            help="print the SGLang command --sglang-python would launch, and exit (for workers "
                                 "started elsewhere, e.g. behind a gateway)")

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        stop = _Stop()
        stop.install()
        config = settings.OPENJEV
        sglang_python = options["sglang_python"] or (None if options["connect"] else config.sglang_python)
        connect = options["connect"] or (None if sglang_python else config.backend_url)
        extra: list[str] = options["sglang_args"]
        if extra and not sglang_python:
            raise CommandError("extra SGLang arguments only apply with --sglang-python")
        overrides = {"OPENJEV_PROFILE": options["profile"]} if options["profile"] else {}
        if sglang_python:
            overrides |= {"OPENJEV_BACKEND": "sglang", "OPENJEV_SGLANG_PYTHON": sglang_python,
                          "OPENJEV_BACKEND_URL": f"http://{_url_host(options['sglang_host'])}:{options['sglang_port']}"}
        elif connect:
            overrides |= {"OPENJEV_BACKEND": "sglang", "OPENJEV_BACKEND_URL": connect.rstrip("/")}
        env_apply(overrides=overrides)
        config = settings.OPENJEV
        if config.secret_key == DEFAULT_SECRET_KEY and not config.debug and not options["print_sglang_command"]:
            raise CommandError("OPENJEV_SECRET_KEY is not set: serve will not run with the public development key "
                               "(it signs admin sessions). Set it to a long random value, the same on every replica, "
                               "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'")
        if options["migrate"] and not options["print_sglang_command"]:
            call_command("migrate", interactive=False, verbosity=0)

        process: subprocess.Popen[bytes] | None = None
        if sglang_python:
            try:
                profile = profile_get(name=config.profile)
                argv, env = sglang_command(
                    profile=profile, python=sglang_python, model=config.model_path or profile.weights,
                    served_name=config.served_model_name, context_length=config.max_input_tokens,
                    port=options["sglang_port"], host=options["sglang_host"], frontend=config.frontend,
                    extra_args=extra, revision=config.revision)
            except StartupError as exc:
                raise CommandError(str(exc)) from None
            if options["print_sglang_command"]:
                self.stdout.write(" ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv)]))
                return
            process = process_launch(argv=argv, env=env, preexec=_die_with_parent())
        elif options["print_sglang_command"]:
            raise CommandError("--print-sglang-command needs --sglang-python (the interpreter that has SGLang)")
        try:
            self._serve(config=config, process=process, stop=stop, started=started, options=options)
        finally:
            stop.stopping = True
            if process is not None:  # also after a crash: the rest of its group may still hold the GPU
                if process.returncode is None:
                    log.info("stopping SGLang (process group %d, %.0f s grace)", process.pid, options["grace"])
                process_group_stop(process=process, grace=options["grace"])

    def _serve(self, *, config: OpenJevConfig, process: subprocess.Popen[bytes] | None, stop: _Stop, started: float,
               options: dict[str, Any]) -> None:
        """Wait for the backend, build the engine, then serve until a signal or SGLang's exit."""
        if config.backend == "sglang" and config.backend_url:
            log.info("waiting for %s to be ready (up to %.0f s)", config.backend_url, options["startup_timeout"])
            try:
                waited = health_wait(url=f"{config.backend_url}{READINESS_PATH}", process=process,
                                     timeout=options["startup_timeout"], stop=stop.event,
                                     fallback_url=f"{config.backend_url}{HEALTH_PATH}")
            except StartupCancelled:
                log.info("stopped before the backend was ready")
                return
            except ChildExited as exc:
                raise CommandError(f"{exc}; the API will not start without it",
                                   returncode=exit_status(returncode=exc.returncode)) from None
            except SupervisorError as exc:
                raise CommandError(text_redact(text=str(exc), secrets=config.secrets)) from None
            log.info("backend healthy after %.1f s", waited)
        try:
            engine = engine_build(config=config)
        except Exception as exc:
            raise CommandError(text_redact(text=f"engine startup failed: {startup_error_message(exc)}",
                                           secrets=config.secrets)) from None
        if stop.event.is_set():
            return
        startup_seconds = time.monotonic() - started
        engine_install(engine, startup_seconds=startup_seconds)
        server = server_create(kind=options["server"], host=options["host"], port=options["port"],
                               drain=options["drain"], keep_alive=options["keep_alive"],
                               access_log=options["access_log"])
        child_status: list[int] = []
        if process is not None:
            def on_exit(returncode: int) -> None:
                if stop.stopping:
                    return
                child_status.append(returncode)
                log.error("SGLang exited with %s: stopping the API", returncode_describe(returncode=returncode))
                server.stop()

            process_watch(process=process, on_exit=on_exit)
        log.info("serving %s on %s:%d with %s (%s backend, model %s), ready after %.1f s", "OpenJev",
                 options["host"], options["port"], options["server"], engine.backend.kind, engine.backend.model,
                 startup_seconds)
        stop.server = server
        if stop.event.is_set():  # a signal arrived while the engine was being built
            server.stop()
        server.run()
        if child_status:
            code = child_status[0]
            raise CommandError(f"SGLang exited with {returncode_describe(returncode=code)} while serving; "
                               "the API stopped with it", returncode=exit_status(returncode=code))
        log.info("API stopped")


def _url_host(host: str) -> str:
    """An address as a URL host: IPv6 in brackets, the wildcard replaced by loopback."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
