"""Per-key limits counted in a real Redis through batched pipelines (`api/plumbing/ratelimits_redis.py`): the counts
are the `limits` library's own, the 429s are the in-process ones, cancelled requests give their in-flight
slot back, the in-flight count's expiry is renewed, a flushed script cache is reloaded, and Redis down
follows the failure policy without a 5xx."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import redis
from limits import RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from api.plumbing.ratelimits import request_admitted
from api.plumbing.ratelimits_redis import RedisCounts, window_of, window_stats_of
from api.plumbing.ratelimits_store import KEY_PREFIX
from tests.conftest import README_REQUEST
from tests.ratelimits.conftest import REDIS_URL, assert_limited

ADDRESS = "127.0.0.1"
"""The client address httpx's ASGI transport reports, so the routes and `held` count one subject."""
SUBJECT = f"address:{ADDRESS}"


def library_storage() -> RedisStorage:
    """The library's own view of the same counts, as `api/plumbing/ratelimits_store.py` configures it."""
    return RedisStorage(f"async+{REDIS_URL}", implementation="redispy", key_prefix=KEY_PREFIX)


async def inflight_of(subject: str = SUBJECT) -> int:
    return await library_storage().get(f"{KEY_PREFIX}:inflight:{subject}")


def inflight_ttl(subject: str = SUBJECT) -> int:
    return int(redis.Redis.from_url(REDIS_URL).ttl(f"{KEY_PREFIX}:{KEY_PREFIX}:inflight:{subject}"))


@contextlib.asynccontextmanager
async def held(*, address: str = ADDRESS) -> AsyncIterator[None]:
    """One request's limits, as a route holds them, from `address`."""
    async with request_admitted(caller=None, address=address):
        yield


async def admitted() -> bool:
    try:
        async with held():
            return True
    except Exception as exc:  # the 429
        assert getattr(exc, "status", None) == 429, exc
        return False


@pytest.fixture
def via_redis(limit: Callable[..., None], redis_counts: str) -> Callable[..., None]:
    """limit(**fields) with the counts in the real Redis."""

    def set_limits(**fields: object) -> None:
        limit(redis_url=redis_counts, **fields)

    return set_limits


async def test_the_batched_counts_are_what_the_library_reads(api, fake, via_redis):
    via_redis(key_requests_per_minute=10, key_tokens_per_minute=100_000, key_concurrency=5)
    answers = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    limiter = SlidingWindowCounterRateLimiter(library_storage())
    requests = await limiter.get_window_stats(RateLimitItemPerMinute(10), SUBJECT, "requests")
    tokens = await limiter.get_window_stats(RateLimitItemPerMinute(100_000), SUBJECT, "tokens")
    assert requests.remaining == 10 - 3
    assert tokens.remaining == 100_000 - sum(a.json()["usage"]["input_tokens"] for a in answers)
    assert await inflight_of() == 0 and inflight_ttl() > 0


async def test_a_window_read_in_a_batch_is_the_librarys_get_window_stats(redis_counts):
    """Same keys, same script, same arithmetic: with a previous window still counting, too."""
    item = RateLimitItemPerSecond(10, 1)
    storage = library_storage()
    counts, limiter = RedisCounts(storage=storage), SlidingWindowCounterRateLimiter(storage)
    (hit,) = await counts.commands_run(commands=[counts.window_acquire(item=item, identifiers=("s", "w"), cost=1)])
    assert hit == 1
    await asyncio.sleep(1.05)  # the window slides: that hit now counts from the previous window
    assert await limiter.hit(item, "s", "w", cost=2)
    (read,) = await counts.commands_run(commands=[counts.window_read(item=item, identifiers=("s", "w"))])
    ours, theirs = (
        window_stats_of(item=item, window=window_of(reply=read)),
        await limiter.get_window_stats(item, "s", "w"),
    )
    assert ours.remaining == theirs.remaining == 10 - 2  # floor(1 × the part left) + 2
    assert abs(ours.reset_time - theirs.reset_time) < 0.05
    refused = counts.window_acquire(item=item, identifiers=("s", "w"), cost=9)
    assert await counts.commands_run(commands=[refused]) == [None]


@pytest.mark.parametrize("where", ["memory", "redis"])
async def test_the_429s_and_their_headers_are_the_same_in_redis_and_in_process(api, fake, limit, redis_counts, where):
    redis_url = redis_counts if where == "redis" else None
    limit(key_requests_per_minute=1, key_concurrency=1, redis_url=redis_url)
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200
    refused = await api.post("/v1/systemone", json=README_REQUEST)
    assert_limited(refused)
    assert refused.headers["x-ratelimit-limit-requests"] == "1"
    if where == "redis":
        await asyncio.sleep(0.05)  # the refused request's in-flight slot is given back after its answer
        assert await inflight_of() == 0

    limit(key_requests_per_minute=None, key_tokens_per_minute=600, key_concurrency=None, redis_url=redis_url)
    assert (await api.post("/v1/systemone", json=README_REQUEST)).status_code == 200  # reads over 300 tokens
    over = await api.post("/v1/systemone", json=README_REQUEST)
    assert_limited(over, counted="tokens")
    assert over.headers["x-ratelimit-limit-tokens"] == "600"
    assert "x-ratelimit-limit-requests" not in over.headers

    limit(key_tokens_per_minute=None, key_concurrency=1, redis_url=redis_url)
    async with held():
        crowded = await api.post("/v1/systemone", json=README_REQUEST)
    assert_limited(crowded, counted=None)
    assert crowded.headers["retry-after"] == "1" and crowded.headers["retry-after-ms"] == "1000"
    assert not any(name.startswith("x-ratelimit") for name in crowded.headers)


async def test_a_request_cancelled_while_it_runs_gives_its_in_flight_slot_back(via_redis):
    via_redis(key_concurrency=1)
    inside = asyncio.Event()

    async def evaluation() -> None:
        async with held():
            inside.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(evaluation())
    await inside.wait()
    assert await inflight_of() == 1 and not await admitted()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert await admitted()
    assert await inflight_of() == 0


async def test_a_request_cancelled_while_it_is_admitted_gives_its_in_flight_slot_back(via_redis):
    via_redis(key_concurrency=1)
    for turns in range(4):  # cancelled before its round trip is sent, during it, and just after its replies
        task = asyncio.create_task(admitted())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert await admitted(), f"slot still held after a cancel at turn {turns}"
        assert await inflight_of() == 0


async def test_the_in_flight_counts_expiry_is_renewed_on_each_admission(via_redis, settings):
    via_redis(key_concurrency=5)
    expiry = int(settings.OPENJEV.request_timeout + 60)
    async with held():
        redis.Redis.from_url(REDIS_URL).expire(f"{KEY_PREFIX}:{KEY_PREFIX}:inflight:{SUBJECT}", 3)
        async with held():
            assert expiry - 2 <= inflight_ttl() <= expiry
            assert await inflight_of() == 2
    assert await inflight_of() == 0


async def test_a_flushed_script_cache_is_loaded_again(via_redis):
    via_redis(key_requests_per_minute=10, key_tokens_per_minute=100_000, key_concurrency=5)
    assert await admitted()
    redis.Redis.from_url(REDIS_URL).script_flush()
    assert await admitted()
    limiter = SlidingWindowCounterRateLimiter(library_storage())
    assert (await limiter.get_window_stats(RateLimitItemPerMinute(10), SUBJECT, "requests")).remaining == 8
    assert await inflight_of() == 0


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_redis_down_follows_the_failure_policy_and_is_never_a_5xx(api, fake, limit, caplog, monkeypatch, policy):
    from api.plumbing import ratelimits_store

    monkeypatch.setitem(ratelimits_store._outage, "logged", False)
    limit(
        key_requests_per_minute=1,
        key_tokens_per_minute=100,
        key_concurrency=1,
        redis_url="redis://127.0.0.1:1/0",
        rate_limit_failure=policy,
    )
    answers = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(3)]
    if policy == "open":
        assert [r.status_code for r in answers] == [200, 200, 200]
    else:
        assert [r.status_code for r in answers] == [429, 429, 429]
        assert answers[0].json()["detail"]["error_type"] == "rate_limits_unavailable"
        assert answers[0].headers["retry-after"] == "5"
    assert len([r for r in caplog.records if "cannot be counted" in r.getMessage()]) == 1


@pytest.fixture
def redis_socket(tmp_path) -> Iterator[str]:
    """A second, real Redis listening on a Unix socket only, as `OPENJEV_REDIS_URL=unix://...` names it."""
    socket = tmp_path / "redis.sock"
    server = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(socket), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not socket.exists():
            assert server.poll() is None and time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)
        yield f"unix://{socket}"
    finally:
        server.terminate()
        server.wait(timeout=10)


async def test_a_unix_socket_url_counts_in_that_redis(api, fake, limit, redis_socket):
    limit(redis_url=redis_socket, key_requests_per_minute=2)
    codes = [(await api.post("/v1/systemone", json=README_REQUEST)).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    counted = redis.Redis.from_url(redis_socket).keys("openjev*")
    assert counted, "nothing was counted in the socket's Redis"
