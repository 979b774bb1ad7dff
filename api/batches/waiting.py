"""A batch watched from a shell (`manage.py batch`, `manage.py evaluate_dataset`): a tqdm bar of its lines as they
are answered, until it ends, and its state in a few lines of text."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO

from tqdm import tqdm

from batches.lifecycle import batch_object
from batches.models import Batch
from batches.progress import batch_progress, duration_text

POLL_SECONDS = 0.5
HINT_SECONDS = 10.0
"""How long a batch may wait for a worker to take it before the shell is told how to run one."""
NO_WORKER_HINT = (
    "no batch worker has taken it yet: `manage.py serve` runs one beside the API, or run `manage.py batch_worker` "
    "(`celery -A openjev_site worker` with OPENJEV_TASK_ENGINE=celery)"
)


def batch_waited(
    *,
    batch_id: str,
    disable: bool = False,
    working: threading.Thread | None = None,
    hint: Callable[[str], None] | None = None,
    file: IO[str] | None = None,
) -> Batch:
    """The batch once it has ended, its lines shown on a bar meanwhile (`disable`: no bar). Returns early, not
    ended, when `working` (the thread doing its work here) has stopped; `hint` hears once if no worker takes it.
    The bar goes to `file` (standard error by default)."""
    batch = Batch.objects.get(pk=batch_id)
    waited_since = time.monotonic()
    with tqdm(total=batch.total, unit="line", disable=disable, dynamic_ncols=True, file=file) as bar:
        while True:
            batch.refresh_from_db()
            bar.total = batch.total
            bar.update(batch.done - bar.n)
            bar.set_postfix_str(batch.status.replace("_", " "))
            if batch.status in Batch.ENDED or (working is not None and not working.is_alive()):
                return batch
            if hint is not None and batch.status == "validating" and time.monotonic() - waited_since > HINT_SECONDS:
                hint(NO_WORKER_HINT)
                hint = None
            time.sleep(POLL_SECONDS)


def batch_text(*, batch: Batch) -> list[str]:
    """The batch as a person reads it in a shell: status, lines, pace, files, and why it failed if it did."""
    shown = batch_object(batch=batch)
    progress = batch_progress(batch=batch)
    rate = "—" if progress.rate is None else f"{progress.rate:.1f}"
    lines = [
        f"{batch.id}: {batch.status.replace('_', ' ')} ({batch.endpoint}, key {batch.owner or '— (auth off)'}"
        + (", labelled" if batch.labelled else "")
        + f", created {batch.created_at:%Y-%m-%d %H:%M:%S %Z})",
        f"  lines: {batch.completed:,} ok · {batch.failed:,} failed · {batch.total:,} in all "
        f"({progress.fraction:.0%}), {rate} a second, {duration_text(progress.eta)} left",
    ]
    files = [f"{kind} file {shown[f'{kind}_file_id']}" for kind in ("output", "error") if shown[f"{kind}_file_id"]]
    if files:
        lines.append("  " + ", ".join(files))
    for error in (batch.errors or {}).get("data", []):
        lines.append(f"  error {error['code']}: {error['message']}")
    return lines
