"""`manage.py smoke URL`: check a deployed endpoint end to end (see `serving.smoke`).

Waits while the server starts (502/503/504, refused connections) up to `--timeout`, checks the three
answer types, a maximum-size choice, the semantics and the 422 for one option too many, prints one
line per check and writes `smoke-result.json`. Exits 1 when any check fails. Sends
`Authorization: Bearer $OPENJEV_API_KEY` when that variable (or `--api-key`) is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from serving.smoke import SmokeFailed, smoke_run


class Command(BaseCommand):
    help = "Smoke-test a running OpenJev endpoint and write smoke-result.json."
    requires_system_checks = ()  # a client: nothing of this project's own setup matters

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="base URL of the API, e.g. https://example.modal.run")
        parser.add_argument(
            "--timeout",
            type=float,
            default=900.0,
            help="seconds to wait for the server to come up (cold starts load a model)",
        )
        parser.add_argument("--request-timeout", type=float, default=600.0, help="seconds per evaluation")
        parser.add_argument(
            "--max-answers",
            type=int,
            default=None,
            help="options of the maximum-size choice (default: the server's /v1/limits)",
        )
        parser.add_argument("--api-key", default=None, help="Bearer key (default: OPENJEV_API_KEY)")
        parser.add_argument("--output", default="smoke-result.json", help="where to write the report")

    def handle(self, *args: Any, **options: Any) -> None:
        def say(line: str) -> None:
            self.stdout.write(line)

        try:
            smoke_run(
                url=options["url"],
                api_key=options["api_key"] or os.environ.get("OPENJEV_API_KEY") or None,
                timeout=options["timeout"],
                request_timeout=options["request_timeout"],
                max_answers=options["max_answers"],
                output=Path(options["output"]),
                say=say,
            )
        except SmokeFailed as exc:
            raise CommandError(f"{exc} (report: {options['output']})") from None
        self.stdout.write(f"report written to {options['output']}")
