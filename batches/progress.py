"""How far a batch has got, as people read it (the admin's list, `manage.py batch status`): lines answered of its
total, lines a second since it started, and when it should end at that pace."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from batches.models import Batch


@dataclass(frozen=True)
class Progress:
    total: int
    done: int
    rate: float | None
    """Lines answered a second, from the start of its work to its end (or now); None before its work starts."""
    eta: timedelta | None
    """Time left at that pace while it runs; None once it has ended, or before a line is answered."""

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0


def batch_progress(*, batch: Batch, now: datetime | None = None) -> Progress:
    started = batch.in_progress_at
    if started is None:
        return Progress(total=batch.total, done=batch.done, rate=None, eta=None)
    until = batch.finalizing_at or batch.ended_at or now or timezone.now()
    elapsed = (until - started).total_seconds()
    rate = batch.done / elapsed if elapsed > 0 else None
    running = batch.status == "in_progress"
    eta = timedelta(seconds=(batch.total - batch.done) / rate) if running and rate else None
    return Progress(total=batch.total, done=batch.done, rate=rate, eta=eta)


def duration_text(value: timedelta | None) -> str:
    """`1h 02m`, `3m 05s`, `12s`; `—` for none."""
    if value is None:
        return "—"
    seconds = max(0, round(value.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {seconds:02d}s" if minutes else f"{seconds}s"
