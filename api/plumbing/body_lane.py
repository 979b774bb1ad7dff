"""Large bodies are read off the event loop, one at a time, in a lane of their own, taken in turn by their callers.

Reading a body is linear in its size (every check is), but linear in two megabytes of JSON is still a few hundred
milliseconds of Python for the worst shapes (sixty thousand chat messages, a hundred thousand keys), and while the
event loop runs it no other request of the process moves: not a health probe, not an answer already scored. So a
body of `OFF_LOOP_BYTES` or more is decoded and validated in one worker thread, both in one turn (the view hands
the lane its format's parse with the decoding: each turn is a wait behind whatever else is queued); the loop keeps
the interpreter between the thread's slices (Python switches threads every few milliseconds), and a small body,
nearly every request, pays no thread hop. How long bodies wait for their turn is `openjev_body_lane_wait_seconds`.

One thread, not a pool: each thread contending for the interpreter takes slices from the loop, so the loop's
worst wait grows with the threads; bodies queue for the lane instead, at most `max_concurrent_requests` of them,
and one more is a 529 (the server is full; retry), as an evaluation over the admission limit is. Python's switching
does not reach into `json.loads`, which holds the interpreter for a whole body (tens of milliseconds at two
megabytes): so after each body its subject rests as long as the body held the interpreter (wall time, since a thread
the OS preempts inside `json.loads` still holds the lock: measured in CPU time on two busy cores, the lane held it
70 % of the time, not half), longer when other subjects want the lane too (`rest_per_second_held`: together they
leave the loop `LOOP_SHARE`), and other subjects' bodies are read meanwhile. So a lane kept busy by one caller leaves
the loop half the interpreter instead of the gaps between bodies, and another caller's body waits for the body being
read, not for the flood's rest (figures: docs/benchmarks.md, `bench/hostile.py`'s lane check).

The lane is shared fairly: bodies wait per subject (the key, or the client's address: `ratelimits.subject_of`),
the thread takes the subjects in turn (one body of each, round and round), and one subject may hold at most
`1 / SUBJECT_SHARE_DIVISOR` of the lane's places (`api.plumbing.body_lane_places`, where an HTTP body takes its place
before it is received and waits for one unread). So a caller flooding the lane with its largest bodies waits on its
own share, while another caller's body still finds a place and waits behind at most one body of each other
subject, not behind the whole flood. A request's subject is its client's address until its key is known
(`lane_subject_bind`, once authenticated), so even a body decoded before authentication waits in its address's
turn, not in a turn of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from api.plumbing.body_lane_places import lane_place_held, place_return, place_take
from api.plumbing.ratelimits import subject_of
from api.plumbing.requestids import client_address_current
from serving import metrics

OFF_LOOP_BYTES = 64 * 1024
"""Bodies this large or larger are read in the lane (64 KiB reads in about a millisecond on the loop)."""

LOOP_SHARE = 0.5
"""The least share of the interpreter the event loop keeps while large bodies queue for the lane: decoding one
holds the interpreter lock for the whole of `json.loads` (tens of milliseconds at two megabytes), so a lane busy
back to back would leave the loop only the gaps between bodies, and every other request of the process waits a
body's decoding at each of its turns."""


_lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openjev-body-lane")
_lock = threading.Lock()
_waiting: dict[object, deque[Callable[[], None]]] = {}
"""The bodies waiting, per subject, in the order the subjects' turns come (a dict keeps insertion order)."""
_counts: dict[str, int] = {"draining": 0}
_last: dict[str, object] = {"subject": None}
"""The subject whose body the lane took last."""
_ready: dict[object, float] = {}
"""When each resting subject's next body may be read (`_drain`); a subject not here need not wait."""
_wake = threading.Condition(_lock)
"""Wakes a lane waiting for every waiting subject's rest when a body arrives (its subject may not be resting)."""
_subject: contextvars.ContextVar[str | None] = contextvars.ContextVar("openjev_body_lane_subject", default=None)


def lane_subject_bind(*, subject: str) -> None:
    """Whom this request's bodies are read for from now on (its key, once authenticated: `subject_of`)."""
    _subject.set(subject)


def lane_subject_current() -> str:
    """The subject bound for this request, else its client's address (`subject_of` without a caller)."""
    bound = _subject.get()
    return bound if bound is not None else subject_of(caller=None, address=client_address_current())


def _subjects_in_turn() -> list[object]:
    """The subjects waiting, in turn (under `_lock`): the subject whose body was read last goes after every other one
    waiting, those that arrived while it was read included, so a body arriving behind a flood waits for the body
    being read, not for the flood's next one too."""
    last = _last["subject"]
    return [s for s in _waiting if s != last] + ([last] if last in _waiting else [])


def _job_take(subject: object) -> Callable[[], None]:
    """`subject`'s oldest body (under `_lock`), its subject moved to the end of the turn."""
    queue = _waiting.pop(subject)
    job = queue.popleft()
    if queue:
        _waiting[subject] = queue
    _last["subject"] = subject
    return job


def _job_due() -> Callable[[], None] | None:
    """The next body: the first subject in turn that is not resting; None (the lane idle) when nothing waits. While
    every subject waiting rests, the lane waits for the first rest to end or for another subject's body."""
    with _lock:
        while True:
            if not _waiting:
                _counts["draining"] = 0
                return None
            now = time.monotonic()
            for rested in [s for s, until in _ready.items() if until <= now]:
                del _ready[rested]
            subject = next((s for s in _subjects_in_turn() if s not in _ready), None)
            if subject is not None:
                return _job_take(subject)
            _wake.wait(min(_ready[s] for s in _waiting) - now)


def rest_per_second_held(*, sharing: int) -> float:
    """How long a subject rests per second its body held the interpreter when `sharing` subjects want the lane: each
    may have `(1 - LOOP_SHARE) / sharing` of the interpreter, so together they leave the loop `LOOP_SHARE`."""
    return sharing / (1 - LOOP_SHARE) - 1


def _drain() -> None:
    """The lane's thread: bodies in turn until none waits, each subject resting after its body for as long as the
    body held the interpreter (wall time: a thread the OS preempts inside `json.loads` still holds the lock) times
    `rest_per_second_held`, while other subjects' bodies may be read."""
    while (job := _job_due()) is not None:
        started = time.monotonic()
        job()
        ended = time.monotonic()
        with _lock:
            subject = _last["subject"]
            sharing = len(_waiting.keys() | {subject})
            _ready[subject] = ended + (ended - started) * rest_per_second_held(sharing=sharing)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller stopped waiting
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _job_of[T](*, work: Callable[[], T], future: asyncio.Future[T]) -> Callable[[], None]:
    """`work()` in the caller's context (its request id), its outcome handed to `future` on the caller's loop; a
    caller that stopped waiting before the body's turn came costs nothing more."""
    loop, context = future.get_loop(), contextvars.copy_context()
    queued = time.monotonic()

    def job() -> None:
        if future.done():
            return
        metrics.body_lane_wait.observe(time.monotonic() - queued)
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(work)
        except BaseException as exc:  # handed to the caller, as run_in_executor does
            error = exc
        with contextlib.suppress(RuntimeError):  # the caller's loop closed meanwhile (a test's): nobody waits
            loop.call_soon_threadsafe(_settle, future, result, error)

    return job


def _enqueue(*, subject: object, job: Callable[[], None]) -> None:
    with _lock:
        _waiting.setdefault(subject, deque()).append(job)
        start = not _counts["draining"]
        _counts["draining"] = 1
        _wake.notify()
    if start:
        _lane.submit(_drain)


async def body_lane_run[T](*, work: Callable[[], T], size: int, subject: str | None = None) -> T:
    """`work()` for a body of `size` bytes: in place when small, else in the lane, in the turn of the place the request
    holds (`lane_place_held`, taken before its body was read), or of a place taken now for `subject` (the request's
    own, `lane_subject_current`, unless given; BodyLaneFull when the lane or the subject's share is full), with the
    caller's context (its request id) either way. A caller that is cancelled stops waiting; a body already being
    read is read to its end, bounded as every body is, and one whose turn has not come is dropped."""
    if size < OFF_LOOP_BYTES:
        return work()
    held = lane_place_held()
    place = held or place_take(subject=subject if subject is not None else lane_subject_current())
    try:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        _enqueue(subject=place.subject, job=_job_of(work=work, future=future))
        return await future
    finally:
        if held is None:
            place_return(place)
