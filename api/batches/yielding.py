"""A batch worker yields the CPU to the API on the same machine.

Batch lines and interactive requests share the backend (a bounded share of its concurrency, a lower SGLang
priority: `inference.priority`) and, where a worker runs beside the API (`serve`'s, or a Celery worker on the same
host), the CPU that prepares prompts and reads answers. Measured on 2 cores, a batch at full speed raised the
interactive p99 from about 70 ms to 366-558 ms (docs/benchmarks.md): the worker's process is therefore run at a
lower CPU priority, so the kernel gives the API's processes the CPU first and the batch what is left.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

BATCH_NICENESS = 10
"""What a batch worker adds to its niceness (Linux: 0 is the default, 19 the lowest priority)."""


def batch_process_yield() -> None:
    """Lower this process's CPU priority (and its children's, which inherit it); a refusal is logged, not raised."""
    try:
        os.nice(BATCH_NICENESS)
    except OSError as exc:
        log.warning("the batch worker could not lower its CPU priority: %s", exc)
