"""A protocol-faithful fake of SGLang 0.5.23's native HTTP API, served for real on loopback.

Controls let a test make it slow, failing, unhealthy, key-protected or malformed; records say what it
received, what was aborted and which clients hung up. See the package docstring for why it exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fake_sglang.answers import Malformed, Outcome, Overrides, abort_result, answer_encode, completion
from fake_sglang.calls import Call, RequestRecord
from fake_sglang.http import (
    ASGIReceive,
    ASGISend,
    auth_exempt,
    authorized,
    body_read,
    dumps,
    loads,
    respond,
    respond_raw,
)
from fake_sglang.images import QWEN3_VISION, VisionTokens
from fake_sglang.logprobs import LogprobFn, Scorer
from fake_sglang.prefix_cache import PrefixCache
from fake_sglang.protocol import DEFAULT_VOCAB_SIZE, BadRequest, Item, generate_parse, validation_error
from fake_sglang.text import TextTokenizer
from fake_sglang.threaded import ThreadedServer


class FakeSGLang(ThreadedServer):
    """The fake server: an ASGI app run by uvicorn in a background thread on 127.0.0.1.

    Controls (plain attributes, settable while it runs): ``delay`` (seconds each /generate call waits, abortable,
    burning no CPU: a GPU's service time), ``batch_delay`` (the wait of a batched call, a list of prompts, when it
    differs: SGLang's warm-up of a prefix and its batch of branches take different times; None: ``delay``),
    ``fail_status``, ``fail_after``,
    ``malformed``, ``healthy``, ``api_key``, ``report_cached_tokens``, ``logprob_fn``, ``clamp_token_ids``,
    ``vision`` (the image markers; None: a text-only model, which refuses image_data), ``image_tokens``,
    ``tokenizer`` (tokenizes `text` prompts, `fake_sglang/text.py`; None, the default, refuses them).
    Records: ``requests`` (unless ``keep_records`` is off), ``item_images`` (likewise: each /generate item's rid and
    the images it was given, as SGLang normalises `image_data` per item), ``aborted``, ``disconnected``,
    ``in_flight``, ``max_in_flight``, ``waiting_calls``, ``generate_calls``.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        vocab_size: int = DEFAULT_VOCAB_SIZE,
        model_path: str = "fake/Qwen3-0.6B",
        served_model_name: str | None = None,
        context_length: int = 32768,
        api_key: str | None = None,
        delay: float = 0.0,
        batch_delay: float | None = None,
        cache_capacity_tokens: int = 2_000_000,
        keep_alive_s: float = 75.0,
        keep_records: bool = True,
        tokenizer: TextTokenizer | None = None,
    ) -> None:
        super().__init__(host=host, port=port, keep_alive_s=keep_alive_s, name="fake-sglang")
        self.vocab_size = vocab_size
        self.model_path = model_path
        self.served_model_name = served_model_name or model_path
        self.context_length = context_length
        self.keep_records = keep_records  # off for long benchmarks: each record holds a whole prompt
        self.tokenizer = tokenizer  # for `text` prompts (fake_sglang/text.py); None refuses them
        self.cache = PrefixCache(cache_capacity_tokens)
        self._initial_api_key = api_key
        self._initial_delay = delay
        self._initial_batch_delay = batch_delay
        self._routes = self._route_table()
        self._lock = threading.Lock()
        self._by_rid: dict[str, Call] = {}
        self.requests: list[RequestRecord] = []
        self.item_images: list[tuple[str, list[str]]] = []
        self.aborted: list[str] = []
        self.disconnected: list[str] = []
        self.in_flight = 0  # live gauges, never reset: calls may straddle a reset
        self.waiting_calls = 0
        self._reset_controls()
        self._reset_records()

    # ---- controls and records --------------------------------------------------------------------

    def _reset_controls(self) -> None:
        self.api_key: str | None = self._initial_api_key
        self.delay: float = self._initial_delay
        self.batch_delay: float | None = self._initial_batch_delay
        self.fail_status: int | None = None
        self.fail_after: int | None = None
        self.malformed: Malformed | None = None
        self.healthy = True
        self.report_cached_tokens = True
        self.logprob_fn: LogprobFn | None = None
        self.clamp_token_ids: set[int] = set()
        self.vision: VisionTokens | None = QWEN3_VISION
        self.image_tokens = 64  # what each image expands to (SGLang measures the image)

    def _reset_records(self) -> None:
        with self._lock:
            self.requests.clear()
            self.item_images.clear()
            self.aborted.clear()
            self.disconnected.clear()
            self.max_in_flight = self.in_flight
            self.generate_calls = 0

    def reset(self, *, controls: bool = True, cache: bool = True) -> None:
        """Forget records (and by default the controls and the prefix cache) between tests."""
        self._reset_records()
        if controls:
            self._reset_controls()
        if cache:
            self._on_loop(self.cache.clear)

    def predict_logprob(self, ids: Sequence[int], token_id: int) -> float:
        """What this server (with its overrides) answers for ``token_id`` after ``ids``."""
        return Scorer(ids, self.logprob_fn, frozenset(self.clamp_token_ids))(token_id)

    def wait_in_flight(self, count: int, timeout: float = 5.0) -> None:
        """Block the calling thread until ``count`` /generate calls are past validation and abortable.

        ``in_flight`` alone is not enough: it counts a call from its arrival, before its rid is known.
        """
        deadline = time.monotonic() + timeout
        while self.waiting_calls < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.waiting_calls} of {count} calls in flight after {timeout}s")
            time.sleep(0.002)

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Block the calling thread until no /generate call is in flight: how a test sees that calls whose
        client went away were ended (aborted on disconnect) rather than left to run out their delay."""
        deadline = time.monotonic() + timeout
        while self.in_flight:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.in_flight} calls still in flight after {timeout}s")
            time.sleep(0.002)

    def on_kill(self) -> None:
        for call in list(self._by_rid.values()):
            call.done.set()  # in-flight handlers wake up and write into closed sockets

    # ---- ASGI -----------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if self.api_key and not auth_exempt(path) and not authorized(scope, self.api_key):
            await body_read(receive)  # drain, so the keep-alive connection stays usable
            await respond(send, 401, {"error": "Unauthorized"})
            return
        route = self._routes.get((method, path))
        if route is None:
            await body_read(receive)
            known = any(p == path for _, p in self._routes)
            status, detail = (405, "Method Not Allowed") if known else (404, "Not Found")
            await respond(send, status, {"detail": detail})
            return
        await route(scope, receive, send)

    def _route_table(self) -> dict[tuple[str, str], Callable[[dict[str, Any], ASGIReceive, ASGISend], Awaitable[None]]]:
        return {
            ("POST", "/generate"): self._generate,
            ("PUT", "/generate"): self._generate,
            ("POST", "/abort_request"): self._abort_request,
            ("GET", "/health"): self._health,
            ("GET", "/health_generate"): self._health,
            ("GET", "/model_info"): self._model_info,
            ("GET", "/get_model_info"): self._model_info,
            ("GET", "/v1/models"): self._models,
            ("GET", "/server_info"): self._server_info,
            ("GET", "/get_server_info"): self._server_info,
        }

    async def _health(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        await respond_raw(send, 200 if self.healthy else 503, b"", b"text/plain")

    async def _model_info(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        await respond(
            send,
            200,
            {
                "model_path": self.model_path,
                "tokenizer_path": self.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
            },
        )

    async def _server_info(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        """A subset of what SGLang merges here (its ServerArgs, scheduler info, per-rank internal states,
        version): the fields a gateway or an operator reads to identify the worker."""
        await respond(
            send,
            200,
            {
                "model_path": self.model_path,
                "tokenizer_path": self.model_path,
                "served_model_name": self.served_model_name,
                "host": self.host,
                "port": self.port,
                "context_length": self.context_length,
                "disable_radix_cache": False,
                "max_total_num_tokens": self.cache.capacity_tokens,
                "internal_states": [{"last_gen_throughput": 0.0}],
                "version": "0.5.23",
            },
        )

    async def _models(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        card = {
            "id": self.served_model_name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": self.served_model_name,
            "max_model_len": self.context_length,
        }
        await respond(send, 200, {"object": "list", "data": [card]})

    async def _abort_request(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        """SGLang's AbortReq: ``rid`` one string (no list), ``abort_all`` a boolean; 200 even for a rid it
        does not know. A batch's base rid does not abort its ``<rid>_<i>`` items: with one tokenizer
        worker SGLang's TokenizerManager.abort_request drops a rid it holds no state for."""
        try:
            body = loads(await body_read(receive))
        except ValueError:
            await respond(send, 400, validation_error("the request body is not valid JSON"))
            return
        rid = body.get("rid") if isinstance(body, dict) else None
        abort_all = body.get("abort_all", False) if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(rid, str | None) or not isinstance(abort_all, bool):
            await respond(send, 400, validation_error("AbortReq takes rid (a string) and abort_all (a boolean)"))
            return
        for one in list(self._by_rid) if abort_all else [rid] if rid else []:
            self._abort(one)
        await respond_raw(send, 200, b"", b"text/plain")

    def _abort(self, rid: str) -> None:
        with self._lock:
            self.aborted.append(rid)
        call = self._by_rid.get(rid)
        if call is not None:
            call.abort(rid)

    # ---- /generate ------------------------------------------------------------------------------

    async def _generate(self, scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        record: RequestRecord = {
            "path": scope["path"],
            "headers": {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            "body": None,
            "t_start": time.monotonic(),
            "t_end": None,
            "status": None,
        }
        with self._lock:
            if self.keep_records:
                self.requests.append(record)
            index = self.generate_calls
            self.generate_calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, payload, content_type = await self._generate_answer(record, index, receive)
            record["status"], record["t_end"] = status, time.monotonic()
            await respond_raw(send, status, payload, content_type)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _generate_answer(
        self, record: RequestRecord, index: int, receive: ASGIReceive
    ) -> tuple[int, bytes, bytes]:
        raw = await body_read(receive)
        try:
            body = loads(raw)
        except ValueError:
            record["body"] = raw
            return 400, dumps(validation_error("the request body is not valid JSON")), b"application/json"
        record["body"] = body
        failure = self._injected_failure(index)
        if failure is not None:
            return failure, dumps({"error": {"message": "fake SGLang injected failure"}}), b"application/json"
        try:
            items, batched = generate_parse(
                body, self.vocab_size, self.context_length, self.vision, self.image_tokens, self.tokenizer
            )
        except BadRequest as exc:
            error = validation_error(exc.message) if exc.validation else {"error": {"message": exc.message}}
            return 400, dumps(error), b"application/json"
        if self.keep_records:
            with self._lock:
                self.item_images += [(item.rid, item.images) for item in items]
        results = await self._run_items(items, receive, self._service_time(batched=batched))
        return answer_encode(results if batched else results[0], self.malformed)

    def _injected_failure(self, index: int) -> int | None:
        if self.fail_after is not None:
            return (self.fail_status or 500) if index >= self.fail_after else None
        return self.fail_status

    def _service_time(self, *, batched: bool) -> float:
        return self.batch_delay if batched and self.batch_delay is not None else self.delay

    async def _run_items(self, items: list[Item], receive: ASGIReceive, delay: float) -> list[dict[str, Any]]:
        """Match the prefix cache, wait `delay` (abortable), then compute and cache each prompt like one SGLang
        batch."""
        started = time.monotonic()
        outcomes = [Outcome(cached=self.cache.match(item.ids)) for item in items]
        call = Call(rids=[item.rid for item in items])
        for rid in call.rids:
            self._by_rid[rid] = call
        self.waiting_calls += 1
        try:
            if delay > 0:
                await self._wait(call, receive, delay)
        finally:
            self.waiting_calls -= 1
            for rid in call.rids:
                if self._by_rid.get(rid) is call:
                    del self._by_rid[rid]
        for item, outcome in zip(items, outcomes, strict=True):
            outcome.aborted = item.rid in call.aborted
        return [self._result(item, outcome, started) for item, outcome in zip(items, outcomes, strict=True)]

    async def _wait(self, call: Call, receive: ASGIReceive, delay: float) -> None:
        """Sleep ``delay`` unless every rid is aborted first; a client disconnect aborts every item too, as in
        SGLang, but at once: SGLang notices at its next check, within ``SGLANG_REQUEST_STATE_WAIT_TIMEOUT``
        seconds (4 by default)."""
        watcher = asyncio.create_task(self._watch_disconnect(call, receive))
        deadline = time.monotonic() + delay
        try:
            # uvloop's timers read a clock cached at the loop's last turn, so one may fire up to a millisecond
            # early: wait again for what is left, so that a call never takes less than its service time.
            while (left := deadline - time.monotonic()) > 0 and not call.done.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await call.done.wait()
        finally:
            watcher.cancel()

    async def _watch_disconnect(self, call: Call, receive: ASGIReceive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                with self._lock:
                    self.disconnected.extend(call.rids)
                for rid in call.rids:
                    call.abort(rid)
                return

    def _result(self, item: Item, outcome: Outcome, started: float) -> dict[str, Any]:
        if outcome.aborted:
            return abort_result(item, started, self.report_cached_tokens)
        self.cache.insert(item.ids)
        cached = min(outcome.cached, len(item.ids) - 1)
        overrides = Overrides(
            vocab_size=self.vocab_size,
            logprob_fn=self.logprob_fn,
            clamped=frozenset(self.clamp_token_ids),
            report_cached_tokens=self.report_cached_tokens,
        )
        return completion(item, cached, started, overrides)
