"""`manage.py issue_api_key NAME`: issue a key from the shell (deploy scripts, first setup).

The key goes to stdout alone, so `KEY=$(manage.py issue_api_key ci)` works; everything else goes
to stderr. Like the admin, it is printed once and only its hash is stored.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from audit.keys import apikey_issue


def expiry_parse(*, days: float | None, at: str | None) -> datetime | None:
    """`--expires-in-days` or an ISO-8601 `--expires-at` (UTC when no offset is given)."""
    if days is not None and at is not None:
        raise CommandError("use either --expires-in-days or --expires-at")
    if days is not None:
        if days <= 0:
            raise CommandError("--expires-in-days must be positive")
        return timezone.now() + timedelta(days=days)
    if at is not None:
        parsed = parse_datetime(at)
        if parsed is None:
            raise CommandError(f"--expires-at {at!r} is not an ISO-8601 date-time (e.g. 2027-01-31T00:00:00Z)")
        if timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed, UTC)
        if parsed <= timezone.now():
            raise CommandError("--expires-at is in the past")
        return parsed
    return None


class Command(BaseCommand):
    help = "Issue an API key and print it once (only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="What the key is for, e.g. 'support-bot production'.")
        parser.add_argument("--owner", default="", help="Who to ask about the key.")
        parser.add_argument("--expires-in-days", type=float, default=None, help="Expire after this many days.")
        parser.add_argument("--expires-at", default=None, help="Expire at this ISO-8601 date-time.")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name:
            raise CommandError("the key needs a name")
        expires_at = expiry_parse(days=options["expires_in_days"], at=options["expires_at"])
        issued = apikey_issue(name=name, owner=options["owner"], expires_at=expires_at)
        self.stdout.write(issued.secret)
        expiry = f"expires {expires_at.isoformat()}" if expires_at else "never expires"
        self.stderr.write(
            f"Issued API key {issued.label} ({name}); it {expiry}. Store it now: it cannot be shown again."
        )
