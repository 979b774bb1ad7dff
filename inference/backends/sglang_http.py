"""The SGLang client's HTTP: one pooled `aiohttp.ClientSession` per event loop (a session is bound to the loop
that created it), what each request carries built once per session (`LoopHttp`), and closing sessions from
outside their loops.

Each call is on the critical path of an evaluation (the warm-up, then the branches), so the client is aiohttp
itself, its URL, headers and timeouts built once per session: httpx's own pool (httpcore) polled every idle
connection's socket on each request and parsed responses in Python (0.8 ms of CPU per call at 16 concurrent
evaluations), and httpx on aiohttp's pool (`httpx_aiohttp`) still built an httpx request and response around
each aiohttp one, about twice aiohttp's own CPU per call (`bench/http_client.py`). Connections are kept alive
(5 s idle) with TCP_NODELAY (aiohttp sets it on every connection).
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass

import aiohttp
from yarl import URL

from inference.tracing import trace_headers_current

KEEPALIVE_SECONDS = 5.0
"""How long an idle backend connection is kept."""


def sessions_close(*, sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession]) -> None:
    """Close the sessions from outside their loops: at exit, or when the backend goes (see `session_close`)."""
    for loop, session in list(sessions.items()):
        session_close(loop=loop, session=session)
    sessions.clear()


def session_close(*, loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    """A running loop closes the session itself; a stopped one is run to close it. A closed loop took its
    connections with it, so closing is bookkeeping that completes without suspending: the coroutine is
    driven here (if it ever suspended, it is dropped, and aiohttp reports the session as unclosed)."""
    if session.closed:
        return
    if loop.is_running():
        loop.call_soon_threadsafe(_close_task_start, loop, session)
        return
    closing = session.close()
    if not loop.is_closed():
        loop.run_until_complete(closing)
        return
    try:
        closing.send(None)
    except StopIteration:
        return
    closing.close()


_closing: set[asyncio.Task[None]] = set()


def _close_task_start(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
    task = loop.create_task(session.close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


@dataclass(frozen=True)
class LoopHttp:
    """One event loop's session, and what each of its requests carries, built once: the `/generate` URL (a
    parsed `yarl.URL`, not a string aiohttp would parse again), the headers (the API key, or the URL's
    credentials as Basic auth) and the timeouts."""

    session: aiohttp.ClientSession
    base: str
    """The backend's URL without credentials and without a trailing slash: the other routes go under it."""
    generate_url: URL
    headers: dict[str, str]
    """Every request's headers: the authorization, if any."""
    generate_headers_base: dict[str, str]
    """A `/generate` request's: JSON, and the authorization."""
    timeout: aiohttp.ClientTimeout

    @classmethod
    def of(cls, *, session: aiohttp.ClientSession, url: str, api_key: str | None, timeout: float) -> LoopHttp:
        """Credentials in the URL become Basic auth, which wins over the API key (aiohttp refuses a request that
        carries both); a pool wait and a read may each take `timeout`, a connection 5 s."""
        parsed = URL(url)
        if parsed.user is not None or parsed.password is not None:
            authorization = aiohttp.encode_basic_auth(parsed.user or "", parsed.password or "")
            parsed = parsed.with_user(None)
        else:
            authorization = f"Bearer {api_key}" if api_key else ""
        headers = {"Authorization": authorization} if authorization else {}
        base = str(parsed).rstrip("/")
        return cls(
            session=session,
            base=base,
            generate_url=URL(base + "/generate"),
            headers=headers,
            generate_headers_base={"Content-Type": "application/json", **headers},
            timeout=aiohttp.ClientTimeout(total=None, connect=timeout, sock_connect=5.0, sock_read=timeout),
        )

    def generate_headers(self) -> dict[str, str]:
        """A `/generate` request's headers, with the evaluation's trace headers when it is traced
        (`inference.tracing`)."""
        trace = trace_headers_current()
        return self.generate_headers_base if trace is None else {**self.generate_headers_base, **trace}


HEALTH_TIMEOUT = aiohttp.ClientTimeout(total=5.0)
"""A readiness check answers within 5 s or the backend counts as not ready."""


async def status_get(*, http: LoopHttp, path: str) -> int:
    """The status of `GET path` (a health route), its body read so the connection goes back to the pool."""
    async with http.session.get(http.base + path, headers=http.headers, timeout=HEALTH_TIMEOUT) as response:
        await response.read()
        return response.status
