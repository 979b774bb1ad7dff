"""A large body is screened in a process of its own before the server decodes it: one its format refuses is
answered from what that process found, and never decoded by the server's interpreter.

Why: decoding JSON holds the interpreter lock for a whole body (`json.loads` is one C call: tens of
milliseconds at two megabytes), and the lane that reads large bodies off the event loop (`api.plumbing.body_lane`)
is still a thread of the same interpreter. One key sending its most expensive refused bodies back to back (two
megabytes of 150,000 unknown fields) stalled every other request of the process at each of its turns: another
key's 87 KB bodies waited a second and a half each, and still 0.9 s with the lane resting between bodies. So in
the lane a body of `SCREEN_BYTES` or more on a format's route is first decoded, its format chosen and parsed in a
child process, with the format's own `FormatCheck` under the settings the server has now. What comes back is
small: nothing (the body is read here as before, so a valid large body is decoded twice in all, once off this
interpreter), what the decoder refused, or what the format refused and what the audit stores of it (`Refused`).

One child per server process, started at its first large body (Django set up in it, a second or two) and ended
with it; one that fails to answer is replaced after `RETRY_SECONDS`, bodies meanwhile read here as before.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import django
from django.conf import settings

from api.plumbing.bodies import Body, body_decode, body_parts_max
from api.plumbing.body_lane import OFF_LOOP_BYTES
from api.plumbing.formats import ErrorShape, Refused, route_of_path
from audit.storage.records import Received

logger = logging.getLogger(__name__)

SCREEN_BYTES = OFF_LOOP_BYTES
"""Bodies this large or larger, on a route whose formats have a `check`, are screened (they are in the lane
already)."""
PARENT_CHECK_SECONDS = 1.0
"""How often the child checks that its server process is still there."""
SCREEN_TIMEOUT = 30.0
"""Seconds the lane waits for the child's verdict before reading the body here (a child stuck or starting)."""

RETRY_SECONDS = 60.0
"""After the child failed to answer, large bodies are read here this long before another child is started (a child
that cannot start is not started again for every body)."""

_lock = threading.Lock()
_retry_at: dict[str, float] = {"t": 0.0}
_pools: dict[int, ProcessPoolExecutor] = {}
"""The screening process of this server process (by pid: a forked process starts its own)."""


@dataclass(frozen=True)
class _Raised:
    """An exception as it crosses to this process: its class, arguments and attributes (an exception whose
    `__init__` takes other arguments than it passes on, `ApiError`'s, does not pickle by itself)."""

    kind: type[Exception]
    args: tuple[Any, ...]
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, exc: Exception) -> _Raised:
        return cls(kind=type(exc), args=exc.args, state=dict(exc.__dict__))

    def rebuilt(self) -> Exception:
        exc = self.kind.__new__(self.kind, *self.args)
        exc.args = self.args
        exc.__dict__.update(self.state)
        return exc


@dataclass(frozen=True)
class _Verdict:
    """What the child found: nothing to say (read the body here), the decoder's refusal, or the format's."""

    undecodable: _Raised | None = None
    format: str = ""
    refused: _Raised | None = None
    received: Received | None = None


def _child_start(parent: int) -> None:
    """Set Django up in the child, and end the child when its server process is gone: a pool's process outlives a
    parent that was killed (SIGKILL, the OOM killer), waiting for work forever."""
    django.setup()

    def parent_watched() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)

    threading.Thread(target=parent_watched, name="openjev-screen-parent", daemon=True).start()


def _screen(call: bytes) -> _Verdict:
    """In the child: decode the body, choose its format, parse it as the format's service would."""
    raw, content_type, shape, path, config, checks = pickle.loads(call)
    settings.OPENJEV = config  # the server's settings now, a test's included
    try:
        body = body_decode(raw=raw, content_type=content_type, shape=shape, max_parts=body_parts_max())
    except Exception as exc:
        return _Verdict(undecodable=_Raised.of(exc))
    route = route_of_path(path)
    wire_format = route.format_of(data=body.data) if route is not None else None
    check = checks.get(wire_format.name) if wire_format is not None else None
    if wire_format is None or check is None:
        return _Verdict()
    bound = {"parts": body.parts} if wire_format.multipart else {}
    try:
        check.parse(data=body.data, **bound)
    except Exception as exc:
        return _Verdict(format=wire_format.name, refused=_Raised.of(exc), received=check.unparsed(data=body.data))
    return _Verdict()


def _pool() -> ProcessPoolExecutor:
    with _lock:
        pool = _pools.get(os.getpid())
        if pool is None:
            _pools.clear()
            pool = _pools[os.getpid()] = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_start,
                initargs=(os.getpid(),),
            )
        return pool


def _pool_drop(pool: ProcessPoolExecutor) -> None:
    with _lock:
        if _pools.get(os.getpid()) is pool:
            del _pools[os.getpid()]
    pool.shutdown(wait=False, cancel_futures=True)


def _verdict_of(*, raw: bytes, content_type: str, shape: ErrorShape, path: str) -> _Verdict:
    """The child's verdict on the body; an empty one (read it here) when the child cannot give one."""
    route = route_of_path(path)
    checks = {f.name: f.check() for f in route.formats if f.check is not None} if route is not None else {}
    if not checks or time.monotonic() < _retry_at["t"]:
        return _Verdict()
    try:
        call = pickle.dumps(
            (raw, content_type, shape, path, settings.OPENJEV, checks), protocol=pickle.HIGHEST_PROTOCOL
        )
    except Exception:  # a check that cannot cross to the child (a test's stand-in for a parse): read here
        return _Verdict()
    pool = _pool()
    try:
        return pool.submit(_screen, call).result(timeout=SCREEN_TIMEOUT)
    except Exception:
        logger.warning(
            "the body screening process gave no verdict; large bodies are read here for %.0f s",
            RETRY_SECONDS,
            exc_info=True,
        )
        _retry_at["t"] = time.monotonic() + RETRY_SECONDS
        _pool_drop(pool)
        return _Verdict()


def body_screened_read(*, raw: bytes, content_type: str, shape: ErrorShape, path: str) -> Body:
    """The lane's work for a body on a format's route: screened in the child when large, then read here unless
    the child found it refused (`Refused` stands in for its JSON)."""
    if len(raw) >= SCREEN_BYTES:
        verdict = _verdict_of(raw=raw, content_type=content_type, shape=shape, path=path)
        if verdict.undecodable is not None:
            raise verdict.undecodable.rebuilt()
        if verdict.refused is not None and verdict.received is not None:
            refused = Refused(format=verdict.format, error=verdict.refused.rebuilt(), received=verdict.received)
            return Body(data=refused, size=len(raw))
    return body_decode(raw=raw, content_type=content_type, shape=shape, max_parts=body_parts_max())
