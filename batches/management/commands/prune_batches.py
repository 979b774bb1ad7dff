"""`manage.py prune_batches [--days N] [--dry-run]`: delete batch jobs that ended more than N days ago
(`OPENJEV_BATCH_RETENTION_DAYS` by default, 30) with their lines and output and error files, uploads older than
that which no batch kept reads, and the task queue's records of tasks that finished before then. Run it daily beside
`prune_evaluations` (their stored evaluations are those rows).

A batch whose completion window closed without a worker to end it (none ran, or all died) is ended first, as
`expired`, with what it answered in its files, so it is pruned in its turn.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from batches.lifecycle import batches_overdue, batches_prunable, batches_pruned, task_results_prunable
from batches.output import batch_expire


class Command(BaseCommand):
    help = "Delete batch jobs (and their files) that ended more than N days ago, and old uploads no batch reads."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=float,
            default=None,
            help="Keep batches this many days after they end (default: OPENJEV_BATCH_RETENTION_DAYS).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Only count what would be deleted.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = settings.OPENJEV.batch_retention_days if options["days"] is None else options["days"]
        if days < 0:
            raise CommandError("--days must not be negative")
        before = timezone.now() - timedelta(days=days)
        overdue = batches_overdue()
        if options["dry_run"]:
            ended, uploads = batches_prunable(before=before)
            self.stdout.write(
                f"Would delete {ended.count()} batch(es) and {uploads.count()} upload(s) older than {days:g} day(s); "
                f"{len(overdue)} batch(es) past their window would end as expired; "
                f"{task_results_prunable(before=before).count()} finished task record(s) would go."
            )
            return
        expired = sum(batch_expire(batch_id=batch_id) for batch_id in overdue)
        batches, files = batches_pruned(before=before)
        tasks, _ = task_results_prunable(before=before).delete()
        self.stdout.write(
            f"Deleted {batches} batch(es) and {files} upload(s) older than {days:g} day(s); "
            f"{expired} batch(es) past their window ended as expired; {tasks} finished task record(s) deleted."
        )
