"""`manage.py export_schema`: write the OpenAPI document exactly as `/openapi.json` serves it.

For client generators, API gateways and docs sites that need the document at build time: it needs
no model and no backend (the evaluator is never built), only the settings. `manage.py spectacular`
gives the same document without the `servers` entry.
"""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError

from api.openapi.document import schema_render


class Command(BaseCommand):
    help = "Write the OpenAPI document (as served at /openapi.json) without loading a model or a backend."
    # No system checks: some of them open the database, and a build step exporting the schema has none.
    requires_system_checks: ClassVar[list[str]] = []  # type: ignore[misc]

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--output", "-o", default="-", help="File to write; `-` (the default) is stdout.")
        parser.add_argument(
            "--server-url",
            default="/",
            help="The document's servers[0].url: `/` (default), a path prefix such as `/jev`, "
            "or an absolute URL such as https://api.example.com/jev.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        url = str(options["server_url"])
        if not url.startswith(("/", "http://", "https://")):
            raise CommandError("--server-url must be a path starting with / or an http(s) URL")
        body = schema_render(server_url=url.rstrip("/") or "/")
        output = str(options["output"])
        if output == "-":
            self.stdout.write(body.decode())
            return
        path = Path(output)
        path.write_bytes(body + b"\n")
        sys.stderr.write(f"wrote {path} ({len(body)} bytes)\n")
