"""`manage.py prune_evaluations --days N`: delete stored evaluations older than N days, in batches.

Batches keep each transaction short, so the API's writer and the admin are never blocked for long
(SQLite has one writer at a time); answers go with their evaluation (ON DELETE CASCADE in the database).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from audit.models import Evaluation


def evaluations_prune(*, days: float, batch_size: int = 1000, pause: float = 0.0, dry_run: bool = False) -> int:
    """Delete evaluations created more than `days` ago, `batch_size` rows per transaction; returns the count."""
    cutoff = timezone.now() - timedelta(days=days)
    old = Evaluation.objects.filter(created_at__lt=cutoff)
    if dry_run:
        return old.count()
    deleted = 0
    while True:
        ids = list(old.order_by("id").values_list("id", flat=True)[:batch_size])
        if not ids:
            return deleted
        with transaction.atomic():
            Evaluation.objects.filter(id__in=ids).delete()
        deleted += len(ids)
        if pause:
            time.sleep(pause)


class Command(BaseCommand):
    help = "Delete stored evaluations (and their answers) older than N days, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=float, required=True, help="Keep this many days of evaluations.")
        parser.add_argument("--batch-size", type=int, default=1000, help="Rows deleted per transaction.")
        parser.add_argument("--pause", type=float, default=0.0, help="Seconds to sleep between batches.")
        parser.add_argument("--dry-run", action="store_true", help="Only count what would be deleted.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days"] < 0:
            raise CommandError("--days must not be negative")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        count = evaluations_prune(
            days=options["days"], batch_size=options["batch_size"], pause=options["pause"], dry_run=options["dry_run"]
        )
        verb = "Would delete" if options["dry_run"] else "Deleted"
        self.stdout.write(f"{verb} {count} evaluation(s) older than {options['days']:g} day(s).")
