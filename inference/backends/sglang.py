"""SGLang client: `/generate` with input ids and selected-token log-probs, readiness, on a bare SGLang
server or behind the SGLang model gateway (SMG) in HTTP mode.

One pooled aiohttp session per event loop (`inference.backends.sglang_http`, which says why aiohttp), and a
process-wide cap on in-flight backend calls so a burst of evaluations cannot flood the workers. Branches go
either as one batched request (one worker behind a cache-aware gateway, one round trip) or as N parallel
requests. What a failed call means is `inference.backends.sglang_failures`.

The batched request has the one shape both SGLang and the gateway accept: the gateway types
`token_ids_logprob` as one flat list of ids and `rid` as one string (it answers 422 to a list of lists
or of rids). SGLang's GenerateReqInput copies a flat `token_ids_logprob` to every item of a batch and
expands a string `rid` to `<rid>_0 … <rid>_{n-1}` (`_normalize_logprob_params`, `_normalize_rid` in
`python/sglang/srt/managers/io_struct.py`), so each item asks for the union of the batch's label ids
and reads its own.

Images go as `image_data` beside the ids (URLs as the client gave them, bytes as `data:` URLs): a flat
list for one prompt, one list per item (`[]` for an item without images) for a batch, as
GenerateReqInput's `_normalize_image_data` reads them: it tells a list of lists from a list of single
images by the first entry alone, so every entry is a list (a `null` first entry would make it wrap each
later list as one image). SGLang expands each placeholder of the ids
itself and keys its prefix cache on the images' hashes, so the warm-up and the branches, which all
send the same images, share the prefix with its images. A branch of a question whose instructions hold
images sends the prefix's images, then its own (its suffix's placeholders come after the prefix's), so
only that branch's item carries them. A text-only body never has the key.

Cancelling is closing: a cancelled call closes its HTTP connection, the gateway then closes its
upstream connection at once, and SGLang's TokenizerManager (`_wait_one_response`) aborts a
non-streaming request whose client disconnected, checking every `SGLANG_REQUEST_STATE_WAIT_TIMEOUT`
seconds (4 by default) while the request waits, for each item of a batch. Nothing sends
`/abort_request`: the gateway does not route it (404), and SGLang takes one rid per call and ignores a
batch's base rid, so aborting a 64-branch batch would cost 64 HTTP calls.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from typing import Any

import aiohttp

from inference.backends.base import BranchCall, BranchMode, BranchScored, Generation, Prefix
from inference.backends.sglang_failures import call_failure_classify, failure_classify
from inference.backends.sglang_http import KEEPALIVE_SECONDS, LoopHttp, session_close, sessions_close, status_get
from inference.backends.sglang_wire import (
    call_ids_text,
    call_images_json,
    generation_parse,
    request_body,
    response_json_read,
)
from inference.errors import BackendFailed
from inference.priority import backend_priority_current
from inference.redaction import backend_text_redact
from inference.tokenizer import Tokenizer

READINESS_PATH = "/readiness"
"""The gateway's readiness: 200, or 503 while it has no healthy worker (when its `/health` still says
200). Any other answer comes from a bare SGLang, which has no such route (404, or 401 from its API-key
middleware, which lets only `/health` through), and sends the check to HEALTH_PATH."""
READINESS_ANSWERS = (200, 503)
HEALTH_PATH = "/health"


class SGLangBackend:
    kind = "sglang"
    context_tokens: int | None = None  # SGLang's own --context-length is set from the same budget

    def __init__(
        self,
        *,
        url: str,
        model: str,
        tokenizer: Tokenizer,
        api_key: str | None = None,
        branch_mode: BranchMode = "batched",
        max_in_flight: int = 64,
        timeout: float = 120.0,
        priority: int | None = None,
    ) -> None:
        """`priority`: what calls made outside a `backend_priority_set` block (interactive ones) send; None: no
        priority."""
        self.url = url.rstrip("/")
        self.model = model
        self.branch_mode = branch_mode
        self._tokenizer = tokenizer
        self._api_key = api_key
        self._timeout = timeout
        self._max_in_flight = max_in_flight
        self._priority_default = priority
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopHttp] = weakref.WeakKeyDictionary()
        self._limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        # When the backend goes (or the process ends), its sessions are closed, never reported as leaked.
        weakref.finalize(self, sessions_close, sessions=self._sessions)

    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def _http(self) -> LoopHttp:
        loop = asyncio.get_running_loop()
        http = self._clients.get(loop)
        if http is None:
            self._clients_sweep()
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_in_flight, keepalive_timeout=KEEPALIVE_SECONDS),
                # A cookie the backend (or a gateway in front of it) sets goes with the later calls, IP hosts too.
                cookie_jar=aiohttp.CookieJar(unsafe=True),
            )
            self._sessions[loop] = session
            http = self._clients[loop] = LoopHttp.of(
                session=session, url=self.url, api_key=self._api_key, timeout=self._timeout
            )
        return http

    def _clients_sweep(self) -> None:
        """Forget the clients of event loops that have closed (a loop per test, per `asyncio.run`), their
        connections closed without a loop to await on."""
        for loop in [loop for loop in self._clients if loop.is_closed()]:
            del self._clients[loop]
            session_close(loop=loop, session=self._sessions.pop(loop))

    def _limit(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        limit = self._limits.get(loop)
        if limit is None:
            limit = self._limits[loop] = asyncio.Semaphore(self._max_in_flight)
        return limit

    async def _generate(self, body: str) -> Any:
        async with self._limit():
            http = self._http()
            try:
                async with http.session.post(
                    http.generate_url, data=body.encode(), headers=http.generate_headers(), timeout=http.timeout
                ) as response:
                    status, content = response.status, await response.read()
            except aiohttp.ClientError as exc:
                raise call_failure_classify(url=self.url, error=exc) from exc
        if status != 200:
            raise failure_classify(status=status, text=_text(content))
        try:
            return response_json_read(content)
        except ValueError as exc:
            raise BackendFailed(
                f"SGLang answered with a body that is not JSON: {backend_text_redact(text=_text(content))[:200]!r}"
            ) from exc

    def _priority(self) -> int | None:
        """The priority of a call made now: its context's (a batch line's), else the backend's own."""
        current = backend_priority_current()
        return self._priority_default if current is None else current

    async def warm(self, *, rid: str, prefix: Prefix) -> Generation:
        # Selected-token log-probs here too: mixing plain and selected-logprob requests in one
        # SGLang batch has crashed the server.
        body = request_body(
            rid=rid,
            ids_json=f"[{prefix.ids_text}]",
            label_ids=prefix.ids[-1:],
            images_json=prefix.images_json,
            priority=self._priority(),
        )
        return generation_parse(await self._generate(body), label_ids=(), rid=rid)

    async def score(self, *, calls: Sequence[BranchCall], scored: BranchScored | None = None) -> list[Generation]:
        """Parallel mode reports each branch to `scored` as its request answers; batched mode reports them
        all together, when the one response arrives."""
        if self.branch_mode == "parallel" or len(calls) == 1:
            return await self._score_parallel(calls, scored)
        generations = await self._score_batched(calls)
        if scored is not None:
            for index, generation in enumerate(generations):
                scored(index, generation)
        return generations

    async def _score_batched(self, calls: Sequence[BranchCall]) -> list[Generation]:
        """One request under the first call's rid; SGLang names the items `<rid>_<i>`, which also proves
        that answers come back in call order."""
        ids_json = ",".join(f"[{call_ids_text(call=c)}]" for c in calls)
        union = list(dict.fromkeys(t for c in calls for t in c.label_ids))
        rid = calls[0].rid
        images = [call_images_json(call=c) for c in calls]
        images_json = f"[{','.join(i or '[]' for i in images)}]" if any(images) else None
        items = await self._generate(
            request_body(
                rid=rid, ids_json=f"[{ids_json}]", label_ids=union, images_json=images_json, priority=self._priority()
            )
        )
        if not isinstance(items, list) or len(items) != len(calls):
            raise BackendFailed(
                f"SGLang answered a batch of {len(calls)} with {type(items).__name__} "
                f"of length {len(items) if isinstance(items, list) else '-'}"
            )
        return [
            generation_parse(item, label_ids=call.label_ids, rid=f"{rid}_{i}")
            for i, (item, call) in enumerate(zip(items, calls, strict=True))
        ]

    async def _score_parallel(self, calls: Sequence[BranchCall], scored: BranchScored | None) -> list[Generation]:
        """A TaskGroup, not gather: the first failure must cancel the sibling branches."""
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._score_one(call, index, scored)) for index, call in enumerate(calls)]
        except* BaseException as failures:
            raise failures.exceptions[0] from None
        return [task.result() for task in tasks]

    async def _score_one(self, call: BranchCall, index: int, scored: BranchScored | None) -> Generation:
        body = request_body(
            rid=call.rid,
            ids_json=f"[{call_ids_text(call=call)}]",
            label_ids=call.label_ids,
            images_json=call_images_json(call=call),
            priority=self._priority(),
        )
        generation = generation_parse(await self._generate(body), label_ids=call.label_ids, rid=call.rid)
        if scored is not None:
            scored(index, generation)
        return generation

    async def abort(self, *, rids: Sequence[str]) -> None:
        """Nothing to send: by the time the runner aborts, its cancelled calls have closed their
        connections, which is what makes SGLang abort them (see the module docstring)."""

    async def health(self) -> bool:
        """The gateway's readiness when the backend is a gateway, else SGLang's own `/health`."""
        http = self._http()
        try:
            status = await status_get(http=http, path=READINESS_PATH)
            if status not in READINESS_ANSWERS:
                status = await status_get(http=http, path=HEALTH_PATH)
        except (aiohttp.ClientError, TimeoutError):
            return False
        return status == 200

    async def close(self) -> None:
        """Close this loop's session; the other loops' connections are closed where they stand."""
        http = self._clients.pop(asyncio.get_running_loop(), None)
        if http is not None:
            self._sessions.pop(asyncio.get_running_loop(), None)
            await http.session.close()
        sessions_close(sessions=self._sessions)
        self._clients.clear()


def _text(content: bytes) -> str:
    return content.decode("utf-8", errors="replace")
