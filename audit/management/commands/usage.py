"""`manage.py usage --since YYYY-MM-DD [--until YYYY-MM-DD] [--key oj_…] [--json]`: usage per API key per day.

The counts the storage writer keeps (answered evaluations, questions, input tokens and cached tokens per key
per UTC day), as a table or as JSON for billing and reports.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.storage.usage import usage_export


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{text!r} is not a date (YYYY-MM-DD)") from None


class Command(BaseCommand):
    help = "Usage per API key per day: evaluations, questions, input and cached tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--since", required=True, help="first day (YYYY-MM-DD, UTC), included")
        parser.add_argument("--until", help="last day, included (default: today)")
        parser.add_argument("--key", help="one key's label (oj_<prefix>, env, admin; '' for no key)")
        parser.add_argument("--json", action="store_true", help="print JSON (a list of rows) instead of a table")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = usage_export(
            since=_day(options["since"]),
            until=_day(options["until"]) if options["until"] else None,
            key_label=options["key"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        self.stdout.write(
            f"{'day':10}  {'key':24} {'evaluations':>11} {'questions':>10} {'input tokens':>13} {'cached':>10}"
        )
        for row in rows:
            self.stdout.write(
                f"{row['day']:10}  {str(row['key']) or '(no key)':24} {row['evaluations']:>11} "
                f"{row['questions']:>10} {row['input_tokens']:>13} {row['cached_tokens']:>10}"
            )
