"""Per-key limits counted in Redis in one round trip per batch of checks, whatever the number of checks.

Through the `limits` library's own calls every check is a round trip of its own, and redis-py's client
costs about 0.1 ms of CPU per call: five calls per evaluation, about 0.7 ms of server CPU (issue #25 allows
0.3; docs/benchmarks.md). Here each check is
one command (EVALSHA of the sliding-window scripts the library registers on its storage, on the keys it
would use, so its own `get_window_stats` reads the same counts; INCRBY and EXPIRE for the in-flight
count), and the commands of every request waiting on one event loop go out in one pipeline (no
transaction: each script is atomic on its own). While a pipeline is on the wire the next one gathers, so
a busy process sends one pipeline per round trip, not one per check.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from limits import RateLimitItem, RateLimitItemPerMinute
from limits.aio.storage import RedisStorage
from limits.aio.storage.redis.redispy import RedispyBridge
from limits.errors import StorageError
from limits.util import WindowStats
from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from audit.callers import KeyLimits

Command = tuple[str | int | float, ...]
Window = tuple[int, float, int, float]
"""A sliding window as the library reads it: previous count, seconds it still counts, current count, its seconds."""


@dataclass
class _Waiting:
    commands: list[Command]
    replies: asyncio.Future[list[Any]]
    undo: list[Command] = field(default_factory=list)
    """Sent once the commands have been applied if the request stopped waiting for them (it was cancelled)."""


class RedisCounts:
    """The commands of one event loop's requests, gathered into one pipeline per round trip (the client's
    connections belong to the loop that opened them)."""

    def __init__(self, *, storage: RedisStorage) -> None:
        bridge = cast(RedispyBridge, storage.bridge)
        self._storage = storage
        self._bridge = bridge
        self._client = cast(Redis, bridge.get_connection())
        self._waiting: list[_Waiting] = []
        self._flush: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()

    def window_acquire(self, *, item: RateLimitItem, identifiers: tuple[str, ...], cost: int) -> Command:
        """The library's `hit`: count `cost` in the window when it fits (reply 1), else nothing (reply None)."""
        key = item.key_for(*identifiers)
        return self._script_command(
            sha=self._bridge.lua_acquire_sliding_window.sha,  # the library's own script and key layout
            keys=(self._storage._previous_window_key(key), self._storage._current_window_key(key)),
            args=(item.amount, item.get_expiry(), cost),
        )

    def window_read(self, *, item: RateLimitItem, identifiers: tuple[str, ...]) -> Command:
        """The library's read of a window (it shifts an expired current window into the previous one, as the
        library's own read does)."""
        key = item.key_for(*identifiers)
        return self._script_command(
            sha=self._bridge.lua_sliding_window.sha,
            keys=(self._storage._previous_window_key(key), self._storage._current_window_key(key)),
            args=(item.get_expiry(),),
        )

    def inflight_add(self, *, key: str, amount: int, expiry: int) -> list[Command]:
        """Add `amount` to an in-flight count and renew its expiry: the library's `incr` sets the expiry only
        when it creates the key, so a key never idle would lose its count under its requests in flight."""
        prefixed = self._bridge.prefixed_key(key)
        return [("INCRBY", prefixed, amount), ("EXPIRE", prefixed, expiry)]

    async def commands_run(self, *, commands: list[Command], undo: list[Command] | None = None) -> list[Any]:
        """The replies to `commands`, sent in the next pipeline. They are queued before anything is awaited, so
        they are sent even if the caller is cancelled meanwhile; `undo` is then sent after them once they
        have been applied (an in-flight slot taken for a request that is gone is given back)."""
        replies = self._queued(waiting=_Waiting(commands=commands, replies=self._loop.create_future(), undo=undo or []))
        try:
            return await replies
        except asyncio.CancelledError:
            if undo and replies.done() and not replies.cancelled() and replies.exception() is None:
                self._queued(waiting=self._ignored(commands=undo), first=True)  # cancelled as its replies came
            raise

    def commands_post(self, *, commands: list[Command]) -> None:
        """Queue `commands` for the next pipeline without waiting for them (a failure is the next check's)."""
        self._queued(waiting=self._ignored(commands=commands))

    def _queued(self, *, waiting: _Waiting, first: bool = False) -> asyncio.Future[list[Any]]:
        """Queue for the next pipeline; `first`: before what is already waiting (an undo of what is applied)."""
        if first:
            self._waiting.insert(0, waiting)
        else:
            self._waiting.append(waiting)
        if self._flush is None:
            self._flush = self._loop.create_task(self._pipelines_send())
        return waiting.replies

    def _ignored(self, *, commands: list[Command]) -> _Waiting:
        """Commands nobody waits for: their failure is marked as seen, or asyncio would log it."""
        future: asyncio.Future[list[Any]] = self._loop.create_future()
        future.add_done_callback(lambda done: done.cancelled() or done.exception())
        return _Waiting(commands=commands, replies=future)

    def _script_command(self, *, sha: str, keys: tuple[str, str], args: tuple[int, ...]) -> Command:
        return ("EVALSHA", sha, len(keys), *(self._bridge.prefixed_key(k) for k in keys), *args)

    async def _pipelines_send(self) -> None:
        """Send what has gathered, one pipeline at a time, until nothing waits."""
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    replies = await self._commands_run(commands=[c for w in batch for c in w.commands])
                except Exception as exc:  # every waiter hears of it; none waits forever
                    error = StorageError(exc) if isinstance(exc, RedisError) else exc
                    for waiting in batch:
                        if not waiting.replies.done():
                            waiting.replies.set_exception(error)
                    continue
                start = 0
                for waiting in batch:
                    end = start + len(waiting.commands)
                    mine, start = replies[start:end], end
                    failed = next((reply for reply in mine if isinstance(reply, Exception)), None)
                    if waiting.replies.cancelled():
                        if waiting.undo and failed is None:
                            self._queued(waiting=self._ignored(commands=waiting.undo), first=True)
                    elif failed is not None:  # a command Redis refused fails its own request only
                        waiting.replies.set_exception(StorageError(failed))
                    else:
                        waiting.replies.set_result(mine)
        finally:
            self._flush = None

    async def _commands_run(self, *, commands: list[Command]) -> list[Any]:
        """One pipeline's replies (a command Redis refused: its error); after a Redis restart (its script cache
        emptied) the scripts are loaded again and only the commands refused for it are sent again (the others
        were applied)."""
        replies = await self._pipeline_run(commands=commands)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            for script in (self._bridge.lua_acquire_sliding_window, self._bridge.lua_sliding_window):
                await self._client.script_load(script.script)
            for i, reply in zip(
                missing, await self._pipeline_run(commands=[commands[i] for i in missing]), strict=True
            ):
                replies[i] = reply
        return replies

    async def _pipeline_run(self, *, commands: list[Command]) -> list[Any]:
        async with self._client.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            return cast(list[Any], await pipe.execute(raise_on_error=False))


def window_of(*, reply: list[Any] | None) -> Window:
    """The read script's reply as the library's storage returns it (counts, and TTLs in seconds)."""
    if not reply:
        return 0, 0.0, 0, 0.0
    return (
        int(reply[0] or 0),
        max(0.0, float(reply[1] or 0)) / 1000,
        int(reply[2] or 0),
        max(0.0, float(reply[3] or 0)) / 1000,
    )


def window_stats_of(*, item: RateLimitItem, window: Window) -> WindowStats:
    """What the library's `SlidingWindowCounterRateLimiter.get_window_stats` makes of the same window."""
    previous_count, previous_expires_in, current_count, current_expires_in = window
    expiry = item.get_expiry()
    weighted = previous_count * previous_expires_in / expiry + current_count
    remaining = max(0, item.amount - math.floor(weighted))
    now = time.time()
    if not (previous_count or current_count):
        return WindowStats(now, remaining)
    previous_reset_in = previous_expires_in % (expiry / previous_count) if previous_count else math.inf
    current_reset_in = current_expires_in % expiry if current_count else math.inf
    return WindowStats(now + min(previous_reset_in, current_reset_in), remaining)


@dataclass(frozen=True)
class Refused:
    counted: Literal["requests", "tokens", "inflight"]
    limit: int
    reset_at: float
    """When the window frees room (epoch seconds); for the in-flight count, now."""


async def redis_admitted(
    *, redis: RedisCounts, subject: str, limits: KeyLimits, inflight_key: str, inflight_expiry: int
) -> Refused | None:
    """A request's admission in one round trip, before its body is read: the requests window counted and the
    in-flight count raised together, the count then given back if the request is refused (a request refused for
    its requests window holds an in-flight slot for that one round trip)."""
    requests = RateLimitItemPerMinute(limits.requests_per_minute) if limits.requests_per_minute else None
    commands: list[Command] = []
    if requests is not None:
        commands.append(redis.window_acquire(item=requests, identifiers=(subject, "requests"), cost=1))
    undo: list[Command] = []
    if limits.concurrency:
        commands += redis.inflight_add(key=inflight_key, amount=1, expiry=inflight_expiry)
        undo = redis.inflight_add(key=inflight_key, amount=-1, expiry=inflight_expiry)
    if not commands:
        return None
    replies = iter(await redis.commands_run(commands=commands, undo=undo))
    if requests is not None and next(replies) is None:
        read = [*undo, redis.window_read(item=requests, identifiers=(subject, "requests"))]
        window = window_of(reply=(await redis.commands_run(commands=read))[-1])
        return Refused("requests", requests.amount, window_stats_of(item=requests, window=window).reset_time)
    if limits.concurrency and int(next(replies)) > limits.concurrency:
        redis.commands_post(commands=undo)
        return Refused("inflight", limits.concurrency, time.time())
    return None


async def redis_tokens_reserved(
    *, redis: RedisCounts, subject: str, item: RateLimitItem, tokens: int
) -> Refused | None:
    """`tokens` counted in the key's tokens window in one round trip if they fit (the library's own atomic
    script: no two requests can both take the last room), else the window's reset, in a second."""
    acquire = redis.window_acquire(item=item, identifiers=(subject, "tokens"), cost=tokens)
    if (await redis.commands_run(commands=[acquire]))[0] is not None:
        return None
    (window,) = await redis.commands_run(commands=[redis.window_read(item=item, identifiers=(subject, "tokens"))])
    return Refused("tokens", item.amount, window_stats_of(item=item, window=window_of(reply=window)).reset_time)


async def redis_released(
    *,
    redis: RedisCounts,
    subject: str,
    inflight_key: str | None,
    inflight_expiry: int,
    tokens: RateLimitItem | None,
    extra: int,
) -> None:
    """The end of a request in one round trip: its in-flight slot (`inflight_key`) given back and the `extra`
    tokens it read beyond its reservation counted in the `tokens` window (as many as fit), queued before anything
    is awaited, so a request cancelled while it ends still gives its slot back."""
    commands: list[Command] = []
    if inflight_key is not None:
        commands += redis.inflight_add(key=inflight_key, amount=-1, expiry=inflight_expiry)
    if tokens is not None and extra > 0:
        commands.append(redis.window_acquire(item=tokens, identifiers=(subject, "tokens"), cost=extra))
    if not commands:
        return
    replies = await redis.commands_run(commands=commands)
    if tokens is not None and extra > 0 and replies[-1] is None:  # the window is nearly full: count what is left
        (window,) = await redis.commands_run(commands=[redis.window_read(item=tokens, identifiers=(subject, "tokens"))])
        left = window_stats_of(item=tokens, window=window_of(reply=window)).remaining
        if left > 0:
            acquire = redis.window_acquire(item=tokens, identifiers=(subject, "tokens"), cost=min(extra, left))
            await redis.commands_run(commands=[acquire])
