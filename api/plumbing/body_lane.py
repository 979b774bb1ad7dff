"""Large bodies are read off the event loop, one at a time, in a lane of their own.

Reading a body is linear in its size (every check is), but linear in two megabytes of JSON is still a few hundred
milliseconds of Python for the worst shapes (sixty thousand chat messages, a hundred thousand keys), and while the
event loop runs it no other request of the process moves: not a health probe, not an answer already scored. So a
body of `OFF_LOOP_BYTES` or more is decoded and validated in one worker thread; the loop keeps the interpreter
between the thread's slices (Python switches threads every few milliseconds), and a small body, nearly every
request, pays no thread hop.

One thread, not a pool: each thread contending for the interpreter takes slices from the loop, so the loop's
worst wait grows with the threads; bodies queue for the lane instead, at most `max_concurrent_requests` of them,
and one more is a 529 (the server is full; retry), as an evaluation over the admission limit is.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from inference.errors import Overloaded
from serving import metrics

OFF_LOOP_BYTES = 64 * 1024
"""Bodies this large or larger are read in the lane (64 KiB reads in about a millisecond on the loop)."""


class BodyLaneFull(Overloaded):
    """The lane has as many bodies waiting as it takes: a 529, counted as the lane's (not the evaluations')."""


_lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openjev-body-lane")
_queued = {"bodies": 0}


async def body_lane_run[T](*, work: Callable[[], T], size: int) -> T:
    """`work()` for a body of `size` bytes: in place when small, else in the lane (Overloaded when it is full),
    with the caller's context (its request id) either way. A caller that is cancelled stops waiting; the work it
    queued still runs to its end, bounded as every body is."""
    if size < OFF_LOOP_BYTES:
        return work()
    limit = settings.OPENJEV.max_concurrent_requests
    if _queued["bodies"] >= limit:
        metrics.overloaded_total.labels("body_lane").inc()
        raise BodyLaneFull(f"{limit} large bodies are waiting to be read; retry shortly")
    _queued["bodies"] += 1
    try:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(_lane, functools.partial(context.run, work))
    finally:
        _queued["bodies"] -= 1
