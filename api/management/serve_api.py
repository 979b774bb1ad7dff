"""The API served by this process under `manage.py serve`: the evaluator built and installed, the ASGI server
made with the API's options (its 408 in the API's own shape), SGLang's exit watched, and the server run until a
signal or that exit. Apart from the command (`api/management/commands/serve.py`), which decides whether this
process serves or supervises workers that each do (`api.management.serve_workers`)."""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.utils.module_loading import import_string

from api.management.serve_sglang import sglang_exit_error
from api.plumbing.api_error import ApiError
from api.plumbing.error_responses import error_body
from api.plumbing.json_render import body_encode
from api.systemone.stream_protocol import stream_transport_limit
from audit.storage.store import storage_start
from inference.runner import Evaluator
from serving.collector import collector_tune
from serving.config import OpenJevConfig
from serving.evaluator import evaluator_build, evaluator_install, startup_error_message
from serving.redaction import text_redact
from serving.servers import Server, ServerFailed, ServerOptions, StopSignal, server_create
from serving.supervisor import process_watch, returncode_describe

log = logging.getLogger("openjev.serve")


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


def evaluator_started(*, config: OpenJevConfig, stop: StopSignal, started: float) -> tuple[Evaluator, float] | None:
    """The evaluator built and installed, storage started, and the seconds since `started`; None when a signal
    arrived while it was being built."""
    try:
        evaluator = evaluator_build(config=config)
    except Exception as exc:
        raise CommandError(
            text_redact(text=f"engine startup failed: {startup_error_message(exc)}", secrets=config.secrets)
        ) from None
    if stop.event.is_set():
        return None
    startup_seconds = time.monotonic() - started
    evaluator_install(evaluator, startup_seconds=startup_seconds)
    storage_start()
    return evaluator, startup_seconds


def sglang_exit_watched(*, process: subprocess.Popen[bytes], stop: StopSignal, server: Server) -> list[int]:
    """Stop `server` when SGLang exits unasked; the list the exit status is put in."""
    child_status: list[int] = []

    def on_exit(returncode: int) -> None:
        if stop.stopping:
            return
        child_status.append(returncode)
        log.error("SGLang exited with %s: stopping the API", returncode_describe(returncode=returncode))
        server.stop()

    process_watch(process=process, on_exit=on_exit)
    return child_status


def api_serve(
    *,
    config: OpenJevConfig,
    process: subprocess.Popen[bytes] | None,
    stop: StopSignal,
    started: float,
    options: dict[str, Any],
) -> None:
    """Build the evaluator, then serve the API in this process until a signal or SGLang's exit."""
    ready = evaluator_started(config=config, stop=stop, started=started)
    if ready is None:
        return
    evaluator, startup_seconds = ready
    # The project's ASGI application, named by its settings (the app does not import the project).
    server = server_create(
        kind=options["server"],
        app=import_string(settings.ASGI_APPLICATION),
        options=replace(server_options(config=config, options=options), reuse_port=options["worker_process"]),
    )
    child_status = [] if process is None else sglang_exit_watched(process=process, stop=stop, server=server)
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
        raise sglang_exit_error(returncode=child_status[0])
    log.info("API stopped")
