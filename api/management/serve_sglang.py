"""`manage.py serve`'s side of the SGLang it supervises or connects to: the command that launches it, the wait
until the backend is ready, what its exit while serving means, and its stop. The process mechanics are
`serving.supervisor`'s (no Django there); here each failure becomes the command's error and exit status."""

from __future__ import annotations

import logging
import shlex
import subprocess
from typing import Any

from django.core.management.base import CommandError

from inference.backends.sglang import HEALTH_PATH, READINESS_PATH
from inference.errors import StartupError
from serving.config import OpenJevConfig
from serving.profiles import profile_get, sglang_command
from serving.redaction import text_redact
from serving.servers import StopSignal
from serving.supervisor import (
    ChildExited,
    StartupCancelled,
    SupervisorError,
    exit_status,
    health_wait,
    process_group_stop,
    returncode_describe,
)

log = logging.getLogger("openjev.serve")


def sglang_command_built(
    *, config: OpenJevConfig, python: str, options: dict[str, Any]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that launch SGLang with `python` for the configured profile and model."""
    try:
        profile = profile_get(name=config.profile)
        return sglang_command(
            profile=profile,
            python=python,
            model=config.model_path or profile.weights,
            served_name=config.served_model_name,
            context_length=config.max_input_tokens,
            port=options["sglang_port"],
            host=options["sglang_host"],
            frontend=config.frontend,
            extra_args=options["sglang_args"],
            revision=config.revision,
        )
    except StartupError as exc:
        raise CommandError(str(exc)) from None


def sglang_command_shown(*, argv: list[str], env: dict[str, str]) -> str:
    """The launch as one shell line, its environment first (`--print-sglang-command`)."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join(argv)])


def backend_ready_wait(
    *, config: OpenJevConfig, process: subprocess.Popen[bytes] | None, stop: StopSignal, options: dict[str, Any]
) -> bool:
    """Wait for the backend's readiness (its health where it has none), up to `--startup-timeout`; False when a
    signal stopped the wait, an error when SGLang exited or never got ready."""
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
        return False
    except ChildExited as exc:
        raise CommandError(
            f"{exc}; the API will not start without it", returncode=exit_status(returncode=exc.returncode)
        ) from None
    except SupervisorError as exc:
        raise CommandError(text_redact(text=str(exc), secrets=config.secrets)) from None
    log.info("backend healthy after %.1f s", waited)
    return True


def sglang_exit_error(*, returncode: int) -> CommandError:
    """The command's error for SGLang exiting while the API served, with an exit status that names the child's."""
    return CommandError(
        f"SGLang exited with {returncode_describe(returncode=returncode)} while serving; the API stopped with it",
        returncode=exit_status(returncode=returncode),
    )


def sglang_stop(*, process: subprocess.Popen[bytes], grace: float) -> None:
    """Stop SGLang's whole process group (also after a crash: the rest of its group may still hold the GPU)."""
    if process.returncode is None:
        log.info("stopping SGLang (process group %d, %.0f s grace)", process.pid, grace)
    process_group_stop(process=process, grace=grace)
