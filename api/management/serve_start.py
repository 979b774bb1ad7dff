"""What `manage.py serve` settles and refuses before anything starts: where the backend comes from, the command
line's configuration in the environment (re-executing with it where the settings loaded without it), and the
combinations it will not run with. Apart from the command (`api/management/commands/serve.py`) so its start reads
as the order of its steps; here because a file in `commands/` would be a command of its own."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import CommandError

from serving.config import DEFAULT_SECRET_KEY, OpenJevConfig
from serving.config_reading import config_from_env
from serving.setting_rules import ConfigError
from serving.workers import workers_count


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


def backend_source(*, config: OpenJevConfig, options: dict[str, Any]) -> tuple[str | None, str | None]:
    """(the interpreter to launch SGLang with, the backend URL to connect to): the command line's, else the
    configuration's; extra SGLang arguments without a launched SGLang are refused."""
    sglang_python = options["sglang_python"] or (None if options["connect"] else config.sglang_python)
    connect = options["connect"] or (None if sglang_python else config.backend_url)
    if options["sglang_args"] and not sglang_python:
        raise CommandError("extra SGLang arguments only apply with --sglang-python")
    return sglang_python, connect


def workers_refused(*, options: dict[str, Any]) -> None:
    """A worker count below 0, or several workers on a server that cannot share the port, stops the start."""
    if options["workers"] < 0:
        raise CommandError("--workers must be 0 (one per core) or more")
    if workers_count(requested=options["workers"]) > 1 and options["server"] != "uvicorn":
        raise CommandError("--workers above 1 needs --server uvicorn (each worker binds the port with SO_REUSEPORT)")


def secret_key_refused(*, config: OpenJevConfig, options: dict[str, Any]) -> None:
    """Serving with the public development key (outside debug) stops the start; printing SGLang's command does not
    serve."""
    if config.secret_key == DEFAULT_SECRET_KEY and not config.debug and not options["print_sglang_command"]:
        raise CommandError(
            "OPENJEV_SECRET_KEY is not set: serve will not run with the public development key "
            "(it signs admin sessions). Set it to a long random value, the same on every replica, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
