"""The parts of the response contract (`test_response_contract.py`) its cases are written with: a reply as it left
the application, the context a case drives the application with, and the drivers every route shares (a key
missing, a cross-site post, a stalled or oversized body, limits, a planted bug, the backend failing).

Each wire format supplies its own cases beside its tests (`tests/<format>/contract.py`, a map of operation to
cases, written with these parts), as each route family does; the contract merges them (`cases_merged`) and holds
every one to the document."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest

from api.classify import registry
from fake_sglang import FakeSGLang
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.classify.conftest import SENTIMENT, SPAM, URGENCY, spec_of

Json = Any
Operation = tuple[str, str]
"""(method, path), as the document names them: ("post", "/v1/systemone")."""

KEY = "s3cret-contract-key"
CROSS_SITE = {"Origin": "https://evil.example"}
CORRUPT_GZIP = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
BROTLI = {"Content-Type": "application/json", "Content-Encoding": "br"}


@dataclass(frozen=True)
class Reply:
    """A response as it left the application."""

    status: int
    headers: httpx.Headers
    body: bytes

    @classmethod
    def of(cls, response: httpx.Response) -> Reply:
        return cls(status=response.status_code, headers=response.headers, body=response.content)


@dataclass
class Ctx:
    """What a case drives the application with; every change it makes is undone after the case."""

    api: httpx.AsyncClient
    fake: FakeSGLang
    patch: pytest.MonkeyPatch
    settings: Any

    def configure(self, **fields: Any) -> None:
        """Change this deployment's settings (`settings.OPENJEV`) and serve with an evaluator built on them."""
        self.settings.OPENJEV = replace(self.settings.OPENJEV, **fields)
        evaluator_install(fake_evaluator(self.fake))

    def evaluator(self, **overrides: Any) -> None:
        evaluator_install(fake_evaluator(self.fake, **overrides))

    def auth_on(self) -> None:
        self.configure(api_key=KEY)

    def broken(self, target: Any, name: str) -> None:
        """`target.name` raises: a bug on our side, which must be answered as the documented 500."""

        def bug(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a bug planted by the contract test")

        self.patch.setattr(target, name, bug)

    def classifiers(self) -> None:
        specs = {d.name: spec_of(d) for d in (SENTIMENT, SPAM, URGENCY)}
        self.patch.setattr(registry, "_classifiers_fetch", lambda: dict(specs))
        registry.classifier_cache_forget()

    async def post(self, path: str, body: Json = None, **kwargs: Any) -> Reply:
        if body is not None:
            kwargs["json"] = body
        return Reply.of(await self.api.post(path, **kwargs))

    async def get(self, path: str, **kwargs: Any) -> Reply:
        return Reply.of(await self.api.get(path, **kwargs))


Drive = Callable[[Ctx], Awaitable[Reply]]


@dataclass(frozen=True)
class Case:
    name: str
    status: int
    drive: Drive


# -- Drivers shared by the evaluating routes ------------------------------------------------------------------


def ok(path: str, body: Json, *, classifiers: bool = False, **settings: Any) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        if settings:
            ctx.configure(**settings)
        if classifiers:
            ctx.classifiers()
        return await ctx.post(path, body)

    return drive


def unauthenticated(path: str, body: Json = None) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.auth_on()
        return await (ctx.get(path) if body is None else ctx.post(path, body))

    return drive


def raw(path: str, content: bytes, headers: dict[str, str]) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        return await ctx.post(path, content=content, headers=headers)

    return drive


def too_large(path: str) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        size = ctx.settings.OPENJEV.max_body_bytes + 1
        return await ctx.post(path, content=b" " * size, headers={"Content-Type": "application/json"})

    return drive


def stalled(path: str) -> Drive:
    """A client that sends the start of its body and then nothing: the body reader's deadline (shortened)."""

    async def drive(ctx: Ctx) -> Reply:
        from openjev_site.asgi import application, body_reader

        ctx.patch.setattr(body_reader, "read_timeout", 0.2)
        chunks = [{"type": "http.request", "body": b'{"model":', "more_body": True}]

        async def receive() -> dict[str, Any]:
            if chunks:
                return chunks.pop()
            await asyncio.sleep(3600)
            raise AssertionError("the body reader waited past its deadline")

        sent: list[Mapping[str, Any]] = []

        async def send(message: Mapping[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        await asyncio.wait_for(application(scope, receive, send), timeout=10)
        start = next(m for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        headers = httpx.Headers([(k.decode("latin-1"), v.decode("latin-1")) for k, v in start["headers"]])
        return Reply(status=start["status"], headers=headers, body=body)

    return drive


def rate_limited(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.configure(key_requests_per_minute=1)
        if classifiers:
            ctx.classifiers()
        first = await ctx.post(path, body)
        assert first.status == 200, first.body
        return await ctx.post(path, body)

    return drive


def limits_unreadable(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    """The counts live in a Redis that does not answer, and the deployment refuses rather than serve unlimited."""

    async def drive(ctx: Ctx) -> Reply:
        ctx.configure(key_requests_per_minute=1, redis_url="redis://127.0.0.1:1/0", rate_limit_failure="closed")
        if classifiers:
            ctx.classifiers()
        return await ctx.post(path, body)

    return drive


def bug(path: str, body: Json, target: Any, name: str, *, classifiers: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.broken(target, name)
        if classifiers:
            ctx.classifiers()
        return await (ctx.get(path) if body is None else ctx.post(path, body))

    return drive


def backend_failing(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.fake.fail_status = 500
        if classifiers:
            ctx.classifiers()
        return await ctx.post(path, body)

    return drive


def backend_dead(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.fake.dead()
        if classifiers:
            ctx.classifiers()
        return await ctx.post(path, body)

    return drive


def backend_slow(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.evaluator(request_timeout=0.3)
        ctx.fake.delay = 5
        if classifiers:
            ctx.classifiers()
        return await ctx.post(path, body)

    return drive


def overloaded(path: str, body: Json, *, classifiers: bool = False) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        ctx.evaluator(max_concurrent_requests=1)
        ctx.fake.delay = 0.5
        if classifiers:
            ctx.classifiers()
        first = asyncio.create_task(ctx.api.post(path, json=body))
        await asyncio.to_thread(ctx.fake.wait_in_flight, 1)
        refused = await ctx.post(path, body)
        assert (await first).status_code == 200
        return refused

    return drive


def cross_site_post(path: str, body: Json) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        return await ctx.post(path, body, headers=CROSS_SITE)

    return drive


def get_path(path: str) -> Drive:
    async def drive(ctx: Ctx) -> Reply:
        return await ctx.get(path)

    return drive


# -- What every evaluating route answers, and the cases put together ----------------------------------------------


def evaluating_cases(path: str, body: Json, *, renderer: tuple[Any, str], classifiers: bool = False) -> list[Case]:
    """What every evaluating route answers the same way (each in its own shape); `renderer` is the route's answer
    module and the renderer it calls, where a planted bug makes the documented 500."""
    c = classifiers
    module, name = renderer
    return [
        Case("a body that is not the gzip it claims", 400, raw(path, b"not gzip at all", CORRUPT_GZIP)),
        Case("no key while auth is on", 401, unauthenticated(path, body)),
        Case("a browser post from another origin", 403, cross_site_post(path, body)),
        Case("a body that stops arriving", 408, stalled(path)),
        Case("a body over max_body_bytes", 413, too_large(path)),
        Case("an unsupported Content-Encoding", 415, raw(path, json.dumps(body).encode(), BROTLI)),
        Case("over the requests per minute", 429, rate_limited(path, body, classifiers=c)),
        Case("rate limits that cannot be counted", 429, limits_unreadable(path, body, classifiers=c)),
        Case("a bug while rendering", 500, bug(path, body, module, name, classifiers=c)),
        Case("the backend answers an error", 502, backend_failing(path, body, classifiers=c)),
        Case("the backend is down", 503, backend_dead(path, body, classifiers=c)),
        Case("the evaluation runs past its deadline", 504, backend_slow(path, body, classifiers=c)),
        Case("more evaluations than max_concurrent_requests", 529, overloaded(path, body, classifiers=c)),
    ]


def cases_merged(*suppliers: dict[Operation, list[Case]]) -> dict[Operation, list[Case]]:
    """Every supplier's cases by operation: two formats on one path (OpenAI's and Google's Decisions) each add
    theirs to the operation's list."""
    merged: dict[Operation, list[Case]] = {}
    for cases in suppliers:
        for operation, listed in cases.items():
            merged.setdefault(operation, []).extend(listed)
    return merged
