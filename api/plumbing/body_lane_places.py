"""The body lane's places: how many large bodies may wait for the lane (`api.plumbing.body_lane`), in all and per
subject, and how a request waits for one before its body is read.

A place is taken for each large body, so a caller flooding the lane fills its own share (`SUBJECT_SHARE_DIVISOR`)
and no more. An HTTP request takes its place before its body is received (`body_lane_place_awaited`, from the
request body reader): one that finds no room waits for it unread, its upload held in its socket, in turn with the
other waiting requests, and is refused (529) only after `within` seconds. Receiving a body costs the event loop
time, and a flood whose bodies were received only to be refused took that time from every other caller of the
process (another key's 87 KB bodies: p50 about 600 ms beside the flood when the flood's surplus was received and
refused, about 110 ms when it waited unread; docs/benchmarks.md). The request holds its place (`lane_place_hold`)
until its body has been decoded and parsed (`lane_place_release`), or until it ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import deque
from dataclasses import dataclass

from django.conf import settings

from inference.errors import Overloaded
from serving import metrics

SUBJECT_SHARE_DIVISOR = 4
"""One subject may have at most this fraction of the lane's places (`max_concurrent_requests`) taken (at least
one): four callers flooding at once fill the lane, one never does."""


class BodyLaneFull(Overloaded):
    """The lane, or the caller's share of it, has as many bodies waiting as it takes: a 529, counted as the
    lane's (not the evaluations')."""


@dataclass(eq=False)
class LanePlace:
    """A request's place in the lane, held from before its body is read until it is parsed."""

    subject: object
    returned: bool = False


_lock = threading.Lock()
_counts: dict[str, int] = {"bodies": 0}
_per_subject: dict[object, int] = {}
_waiters: deque[tuple[object, asyncio.Future[LanePlace]]] = deque()
"""Requests waiting for a place, oldest first."""
_held: contextvars.ContextVar[LanePlace | None] = contextvars.ContextVar("openjev_body_lane_place", default=None)


def _limits() -> tuple[int, int]:
    """The lane's places in all, and one subject's share of them."""
    limit = settings.OPENJEV.max_concurrent_requests
    return limit, max(1, limit // SUBJECT_SHARE_DIVISOR)


def _room(subject: object, *, limit: int, share: int) -> bool:
    return _counts["bodies"] < limit and _per_subject.get(subject, 0) < share


def _counted(subject: object) -> LanePlace:
    _counts["bodies"] += 1
    _per_subject[subject] = _per_subject.get(subject, 0) + 1
    return LanePlace(subject=subject)


def _refused(*, limit: int, share: int) -> BodyLaneFull:
    metrics.overloaded_total.labels("body_lane").inc()
    if _counts["bodies"] >= limit:
        return BodyLaneFull(f"{limit} large bodies are waiting to be read; retry shortly")
    return BodyLaneFull(f"{share} large bodies of this caller are waiting to be read; retry when one is answered")


def place_take(*, subject: object) -> LanePlace:
    """One more body waiting for `subject`, unless the lane or the subject's share of it is full (BodyLaneFull)."""
    limit, share = _limits()
    with _lock:
        if _room(subject, limit=limit, share=share):
            return _counted(subject)
        raise _refused(limit=limit, share=share)


def place_return(place: LanePlace) -> None:
    """Give `place` back (once; again is nothing), handing it to the oldest waiting request it makes room for."""
    if place.returned:
        return
    place.returned = True
    limit, share = _limits()
    with _lock:
        _counts["bodies"] -= 1
        left = _per_subject[place.subject] - 1
        if left:
            _per_subject[place.subject] = left
        else:
            del _per_subject[place.subject]
        handed = next((w for w in _waiters if _room(w[0], limit=limit, share=share)), None)
        if handed is None:
            return
        _waiters.remove(handed)
        subject, future = handed
        given = _counted(subject)
    future.get_loop().call_soon_threadsafe(_handed, future, given)


def _handed(future: asyncio.Future[LanePlace], place: LanePlace) -> None:
    if future.done():  # it stopped waiting meanwhile: the next one gets the place
        place_return(place)
    else:
        future.set_result(place)


async def body_lane_place_awaited(*, subject: object, within: float) -> LanePlace:
    """A place for `subject`'s body before the body is read: at once if there is room, else when one is given back
    to it in turn (its body unread meanwhile); BodyLaneFull after `within` seconds without one."""
    limit, share = _limits()
    future: asyncio.Future[LanePlace] = asyncio.get_running_loop().create_future()
    with _lock:
        if _room(subject, limit=limit, share=share):
            return _counted(subject)
        waiter = (subject, future)
        _waiters.append(waiter)
    try:
        async with asyncio.timeout(within):
            return await future
    except BaseException as exc:
        _waiter_dropped(waiter)
        if not isinstance(exc, TimeoutError):
            raise  # the client left
        with _lock:
            refusal = _refused(limit=limit, share=share)
        raise refusal from None


def _waiter_dropped(waiter: tuple[object, asyncio.Future[LanePlace]]) -> None:
    """A request stopped waiting: out of the queue, or, if a place was handed to it meanwhile, the place passed on."""
    with _lock:
        if waiter in _waiters:
            _waiters.remove(waiter)
            return
    future = waiter[1]
    if future.done() and not future.cancelled():
        place_return(future.result())
    else:
        future.cancel()  # the handing over on its way finds it done, and passes the place on


def lane_place_hold(place: LanePlace | None) -> contextvars.Token[LanePlace | None]:
    """Make `place` this request's: its large bodies are read in the lane on it (`lane_place_held`)."""
    return _held.set(place)


def lane_place_held() -> LanePlace | None:
    """The place this request holds, if it holds one not given back yet."""
    place = _held.get()
    return place if place is not None and not place.returned else None


def lane_place_release() -> None:
    """Give this request's place back once its body is parsed, so the caller's next body may be read while this
    one is evaluated."""
    place = _held.get()
    if place is not None:
        place_return(place)


def lane_counts() -> tuple[int, int]:
    """(places taken, requests waiting for one): for tests and the lane's own checks."""
    with _lock:
        return _counts["bodies"], len(_waiters)
