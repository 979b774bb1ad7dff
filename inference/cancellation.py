"""Backend aborts off the request path.

A cancelled evaluation (client gone, deadline, failure) must free its admission slot and answer at
once: waiting for the backend to acknowledge an abort kept the slot held and pushed a 5 s deadline to
a 504 at 10 s when the backend hung. So an abort runs as a background task, bounded in time and in
number, and whatever goes wrong with it is logged, never raised into the request.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence

from inference.backends.base import Backend

log = logging.getLogger(__name__)

ABORT_TIMEOUT = 5.0
"""Seconds an abort may take before it is given up (and logged)."""
MAX_PENDING_ABORTS = 64
"""Aborts in the background at once on one event loop; past that, new ones are dropped (and logged):
an abort storm must not cost more than the work it cancels."""

# Per loop, like the backends' HTTP clients: a loop that is gone takes its tasks with it.
_pending: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set[asyncio.Task[None]]] = weakref.WeakKeyDictionary()


def abort_schedule(*, backend: Backend, rids: Sequence[str]) -> None:
    """Ask `backend` to drop `rids` (deduplicated) in the background; returns at once."""
    unique = list(dict.fromkeys(rids))
    if not unique:
        return
    loop = asyncio.get_running_loop()
    pending = _pending.setdefault(loop, set())
    if len(pending) >= MAX_PENDING_ABORTS:
        log.warning("%d backend aborts already pending: not aborting %d more request(s)", len(pending), len(unique))
        return
    task = loop.create_task(_abort_run(backend=backend, rids=unique))
    pending.add(task)
    task.add_done_callback(pending.discard)


async def _abort_run(*, backend: Backend, rids: list[str]) -> None:
    try:
        async with asyncio.timeout(ABORT_TIMEOUT):
            await backend.abort(rids=rids)
    except Exception as exc:  # an abort failure must never surface in a request
        log.warning("backend abort of %d request(s) failed: %r", len(rids), exc)
