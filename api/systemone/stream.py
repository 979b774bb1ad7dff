"""`WS /v1/systemone/stream`: System One evaluations pipelined over one WebSocket, answers streamed.

The protocol (docs/streaming.md has the full description and a client):

    client: {"type": "auth", "api_key": KEY}      when the upgrade carried no Authorization header
    client: {"id": ID, <body of POST /v1/systemone>}          "type": "evaluate" may be given
    client: {"type": "cancel", "id": ID}
    server: {"type": "answer", "id", "question_id", "answer"}  one per question, as soon as it is scored
    server: {"type": "done", "id", "usage", "request_id"}     the evaluation is over
    server: {"type": "error", "id", "status", "detail", ...}  the evaluation (or a message) failed

Each evaluation ends with exactly one `done` or `error`. Evaluations go through the same service as
`POST /v1/systemone` (validation, admission with its 529, the deadline, storage), each in its own
task, so several run at once on one socket. A message that cannot be read (a binary frame, not JSON,
too large, an unknown type, a missing id or one JavaScript cannot hold) gets an `error` with
`"id": null` or its id, and the socket stays open. The socket is closed only when a page of another
origin opened it (4403: the same rule as the HTTP API's, so no website can use a service it can reach
through its visitor's browser), for authentication (4401: a wrong key, or none within
`OPENJEV_STREAM_AUTH_TIMEOUT` of opening), for idleness (4408), and when its client is over a limit (4429:
its address sent too many wrong keys, over HTTP or here, the one throttle; or its key, or its address while auth
is off, already holds `OPENJEV_MAX_WEBSOCKETS_PER_KEY` sockets, so no caller can take every socket of the process;
or, still waiting for its key, it gave its place to a newer socket from its address: `api.systemone.socket_shares`),
with a reason; the per-process cap on open sockets and the host check are `openjev_site.sockets`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from rest_framework.exceptions import AuthenticationFailed

from api.checking.json_body import body_parse, document_problems
from api.plumbing.api_error import ApiError
from api.plumbing.authentication import caller_authenticate
from api.plumbing.body_lane import body_lane_run
from api.plumbing.error_responses import exception_detail
from api.plumbing.json_render import text_encode
from api.plumbing.metering import CLIENT_CLOSED, STREAM_API, meter_caller, meter_close, meter_open, phase_timed
from api.plumbing.ratelimits import Admission, request_admitted, subject_of
from api.plumbing.requestids import client_address_bound, request_id_assign, request_id_bound
from api.systemone.render import answer_render
from api.systemone.service import systemone_evaluate
from api.systemone.socket_shares import socket_share_return, socket_share_take, socket_wait, waiting_subject
from audit.callers import Caller
from inference.errors import Problem, RequestInvalid, value_quoted
from inference.scoring import Answer
from serving.hosts import origin_same, scope_host

log = logging.getLogger(__name__)

STREAM_PATH = "/v1/systemone/stream"
CLOSE_STATUS_BASE = 4000
"""A close code is 4000 plus the HTTP status it stands for: 4401, 4403, 4408, 4429, 4503, 4529."""
CLOSE_UNAUTHENTICATED = 4401
CLOSE_CROSS_ORIGIN = 4403
CLOSE_IDLE = 4408
CLOSE_RATE_LIMITED = 4429
CLOSE_REASON_MAX_CHARACTERS = 120
"""A close frame carries at most 123 bytes of reason."""
ID_MAX_CHARACTERS = 200
ID_MAX_MAGNITUDE = 2**53 - 1
"""Integer ids are bounded to what a JavaScript number holds exactly (`Number.MAX_SAFE_INTEGER`), so a
browser client reads back the id it sent."""
NO_CHANNEL_LAYER = "openjev-stream-none"
"""A layer alias that is never configured: a stream socket answers only its own client, so it needs no
channel of its own in the layer (with Redis, each channel would be one more blocking reader)."""
TRANSPORT_LIMIT_FACTOR = 2
"""The ASGI server refuses (closes with 1009) a message over this many times the body limit, and hands
anything smaller to the consumer, which answers one over the limit with a 413 error message: a
client gets told, and a runaway client cannot make the server buffer without bound."""
UNAUTHENTICATED_MESSAGE_MAX_CHARACTERS = 4096
"""A socket that has not authenticated is read only this far: an auth message is a few dozen characters, and a
larger one is refused (4401) unparsed, so a caller with no key costs the server nothing but the frame."""
ADMITTED_BEFORE_READ_BYTES = 1024
"""A message this large or larger is admitted under its key's limits before it is parsed (an evaluation, nearly
always: an auth or a cancel is under 300 bytes), so a key over its request limit costs no parse; a smaller one,
cheap to read, is admitted once it is known to be an evaluation."""
CANCEL_REASON = "the evaluation was cancelled by the client"
"""Given to the evaluation's task on a cancel: the client and the stored row both read it (499 cancelled)."""


def stream_transport_limit(*, max_body_bytes: int) -> int:
    """The message size the ASGI server (uvicorn, daphne) is told to accept on a WebSocket."""
    return TRANSPORT_LIMIT_FACTOR * max_body_bytes


class StreamError(Exception):
    """A message that cannot be acted on: answered with an error message, the socket stays open."""

    def __init__(self, status: int, error_type: str, message: str, *, eid: Any = None) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message, self.eid = status, error_type, message, eid


def evaluation_id_check(*, message: dict[str, Any]) -> Any:
    """The client's id of an evaluation or a cancel: a string of 1 to 200 characters, or an integer of
    magnitude at most 2**53 - 1."""
    if "id" not in message:
        raise RequestInvalid([Problem(("id",), "Field required", "missing")])
    eid = message["id"]
    if isinstance(eid, bool) or not isinstance(eid, str | int):
        raise RequestInvalid([Problem(("id",), "Input should be a string or an integer", "id_type")])
    if isinstance(eid, str) and not 0 < len(eid) <= ID_MAX_CHARACTERS:
        raise RequestInvalid(
            [Problem(("id",), f"Input should have 1 to {ID_MAX_CHARACTERS} characters", "string_length")]
        )
    if isinstance(eid, int) and abs(eid) > ID_MAX_MAGNITUDE:
        raise RequestInvalid(
            [
                Problem(
                    ("id",),
                    f"Input should be an integer from -{ID_MAX_MAGNITUDE} to "
                    f"{ID_MAX_MAGNITUDE} (what a JavaScript number holds exactly)",
                    "int_range",
                )
            ]
        )
    return eid


def _id_echoed(message: dict[str, Any]) -> Any:
    """The message's id as an error may echo it: only an id that passes `evaluation_id_check` (short), else null."""
    try:
        return evaluation_id_check(message=message)
    except RequestInvalid:
        return None


def stream_origin_allowed(*, scope: dict[str, Any]) -> bool:
    """No `Origin` (a client that is not a browser), or this service's own origin, scheme and port included
    (`serving.hosts.origin_same`, the HTTP API's rule): a browser opens a WebSocket to any site without asking."""
    headers = scope.get("headers", [])
    origin = dict(headers).get(b"origin")
    if origin is None:
        return True
    host = scope_host(headers=headers, server=scope.get("server"))
    return origin_same(origin=origin.decode("latin-1"), scheme=str(scope.get("scheme", "ws")), host=host)


@dataclass
class Admitted:
    """A message's admission under its key's limits, taken before the message was read: what holds it open."""

    held: contextlib.AsyncExitStack
    admission: Admission
    taken: bool = False
    """Whether the evaluation's task started, and so gives the admission back itself when it ends."""


_releasing: set[asyncio.Task[None]] = set()
"""Tasks that end what a socket leaves behind (an admission given back, a socket closed), held until they end."""


def _release_unless_taken(task: asyncio.Task[None], *, admitted: Admitted) -> None:
    """A task cancelled before its first step never runs its body (the socket closed at once): its admission is
    given back here instead, so its in-flight slot is not held until it expires."""
    if admitted.taken:
        return
    release = asyncio.get_running_loop().create_task(admitted.held.aclose())
    _releasing.add(release)
    release.add_done_callback(_releasing.discard)


def _message_decode(*, raw: bytes) -> dict[str, Any]:
    """Strict JSON, as the body of `POST /v1/systemone` is read (a large one in the body lane)."""
    try:
        message = body_parse(raw)
    except ValueError as exc:
        raise StreamError(400, "invalid_request", str(exc)) from None
    problems = document_problems(data=message)
    if problems:  # before anything is echoed back: a lone surrogate in an id could not be sent
        raise RequestInvalid(problems)
    if not isinstance(message, dict):
        raise StreamError(400, "invalid_request", "a message must be a JSON object")
    return message


def _id_key(eid: Any) -> str:
    """1 and "1" are different ids."""
    return json.dumps(eid)


class SystemOneStreamConsumer(AsyncJsonWebsocketConsumer):
    """One socket: authentication, the evaluations in flight, an ordered outbox and the idle watchdog."""

    channel_layer_alias = NO_CHANNEL_LAYER

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The socket's share is given back however the consumer ends (closed by either side, or a failure)."""
        self.share: str | None = None
        """The subject this socket is counted for: its client's address, then the key it authenticated with."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.share is not None:
                socket_share_return(subject=self.share, holder=self)

    async def connect(self) -> None:
        client = self.scope.get("client")
        self.address: str | None = str(client[0]) if client else None
        """The client's address (`serving.addresses`: through trusted proxies), as the HTTP API counts it."""
        self.caller: Caller | None = None
        self.authenticated = False
        self.in_flight: dict[str, asyncio.Task[None]] = {}
        self.cancelled: set[str] = set()
        self.outbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.closing = False
        self.last_activity = asyncio.get_running_loop().time()
        self.settled = asyncio.Event()
        """Set whenever an evaluation ends, so the idle watchdog looks again."""
        await self.accept()
        self.writer = asyncio.create_task(self._write(), name="openjev-stream-writer")
        self.watchdog = asyncio.create_task(self._watch_idle(), name="openjev-stream-idle")
        self.deadline: asyncio.Task[None] | None = None
        if not stream_origin_allowed(scope=self.scope):
            await self._close(code=CLOSE_CROSS_ORIGIN, reason="a web page of another origin may not open this socket")
            return
        header = dict(self.scope.get("headers", [])).get(b"authorization")
        if header is not None or not settings.OPENJEV.auth_required:
            await self._authenticate(authorization=header.decode("latin-1") if header is not None else None)
        else:
            self.share = waiting_subject(address=self.address)
            socket_wait(subject=self.share, holder=self, give_way=self._give_way)
            self.deadline = asyncio.create_task(
                self._auth_deadline(seconds=settings.OPENJEV.stream_auth_timeout), name="openjev-stream-auth-deadline"
            )

    async def dispatch(self, message: dict[str, Any]) -> None:
        """channels' dispatch without its per-message thread hop to close stale database connections:
        nothing here uses the ORM on the event loop (key lookups run in their own thread)."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def disconnect(self, code: int) -> None:
        """The client is gone: its evaluations are cancelled (and stored as 499, as over HTTP)."""
        self.closing = True
        for task in self.in_flight.values():
            task.cancel()
        self.watchdog.cancel()
        if self.deadline is not None:
            self.deadline.cancel()
        self.outbox.put_nowait(None)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if self.closing:
            return
        self.last_activity = asyncio.get_running_loop().time()
        try:
            if text_data is None:
                raise StreamError(
                    415,
                    "unsupported_media_type",
                    "binary frames are not read: send each message as JSON in a text frame",
                )
            if not self.authenticated and len(text_data) > UNAUTHENTICATED_MESSAGE_MAX_CHARACTERS:
                await self._refuse(
                    "authenticate first: before a key is known a message is read only up to "
                    f"{UNAUTHENTICATED_MESSAGE_MAX_CHARACTERS} characters"
                )
                return
            await self._admitted_handle(raw=text_data.encode("utf-8"))
        except StreamError as exc:
            self._send_soon(
                {
                    "type": "error",
                    "id": exc.eid,
                    "status": exc.status,
                    "detail": {"error_type": exc.error_type, "message": exc.message},
                }
            )
        except (RequestInvalid, ApiError) as exc:  # ApiError: the key over its limits (429), before any parse
            status, detail = exception_detail(exc)
            self._send_soon({"type": "error", "id": None, "status": status, "detail": detail})

    # -- reading messages -------------------------------------------------------------------------

    async def _admitted_handle(self, *, raw: bytes) -> None:
        """Read and act on a message, the cheap checks first: its size (413), then, for one of
        `ADMITTED_BEFORE_READ_BYTES` or more, the key's limits (429), so neither a message over the limit nor a key
        over its limits costs a parse; the evaluation it starts takes that admission over, and any other message
        gives it back once handled."""
        limit = settings.OPENJEV.max_body_bytes
        if len(raw) > limit:
            raise StreamError(413, "request_too_large", f"the message is over {limit} bytes")
        async with contextlib.AsyncExitStack() as held:
            admitted: Admitted | None = None
            if len(raw) >= ADMITTED_BEFORE_READ_BYTES:
                admission = await held.enter_async_context(request_admitted(caller=self.caller, address=self.address))
                admitted = Admitted(held=held, admission=admission)
            work = functools.partial(_message_decode, raw=raw)
            message = await body_lane_run(work=work, size=len(raw), subject=self.share)
            await self._handle(message, size=len(raw), admitted=admitted)

    async def _handle(self, message: dict[str, Any], *, size: int, admitted: Admitted | None) -> None:
        kind = message.get("type", "evaluate")
        if kind == "auth":
            await self._auth_message(message)
        elif not self.authenticated:
            await self._refuse(
                'authenticate first: send {"type": "auth", "api_key": ...} or an Authorization header with the upgrade'
            )
        elif kind == "evaluate":
            self._evaluation_start(message, size=size, admitted=admitted)
        elif kind == "cancel":
            self._cancel(message)
        else:
            raise StreamError(
                400,
                "invalid_request",
                f"unknown message type {value_quoted(kind)}; send auth, evaluate (the default) or cancel",
                eid=_id_echoed(message),
            )

    async def _auth_message(self, message: dict[str, Any]) -> None:
        """Accepted at any time (a browser may always send one, auth on or off); a bad key closes the socket."""
        key = message.get("api_key")
        if not isinstance(key, str) or not key:
            await self._refuse("the auth message needs an api_key string")
            return
        await self._authenticate(authorization=f"Bearer {key}")

    async def _authenticate(self, *, authorization: str | None) -> None:
        """The key checked as over HTTP, from this socket's address: a wrong one counts in the address's wrong-key
        throttle (4401), an address over it is closed with 4429 whatever the key, and the socket then counts
        against its key's share."""
        try:
            with client_address_bound(address=self.address):
                caller = await caller_authenticate(authorization=authorization)
        except AuthenticationFailed as exc:
            await self._refuse(str(exc.detail))
            return
        except ApiError as exc:  # 429: too many wrong keys from this address; 503: keys cannot be checked now
            await self._close(code=CLOSE_STATUS_BASE + exc.status, reason=exc.message)
            return
        if not await self._share_move(subject=subject_of(caller=caller, address=self.address)):
            return
        self.caller = caller
        self.authenticated = True

    async def _share_move(self, *, subject: str) -> bool:
        """Count this socket for `subject` instead (`api.systemone.socket_shares`): its key once it authenticated,
        its address with auth off. One that already holds its share gets the socket closed with 4429."""
        if subject == self.share:
            return True
        if not socket_share_take(subject=subject):
            limit = settings.OPENJEV.max_websockets_per_key
            holder = "this API key" if subject.startswith("key:") else "this address"
            await self._close(
                code=CLOSE_RATE_LIMITED,
                reason=f"{holder} holds {limit} sockets, the most one may in this process; close one or retry later",
            )
            return False
        if self.share is not None:
            socket_share_return(subject=self.share, holder=self)
        self.share = subject
        return True

    def _give_way(self) -> None:
        """This socket, still waiting for its key, gives its place to a newer one from its address."""
        closing = asyncio.get_running_loop().create_task(
            self._close(
                code=CLOSE_RATE_LIMITED,
                reason="this address opened more sockets waiting for a key than it may hold; authenticate sooner",
            )
        )
        _releasing.add(closing)
        closing.add_done_callback(_releasing.discard)

    async def _refuse(self, reason: str) -> None:
        await self._close(code=CLOSE_UNAUTHENTICATED, reason=reason)

    async def _auth_deadline(self, *, seconds: float) -> None:
        """Close a socket still unauthenticated `seconds` after it opened, whatever it sent meanwhile: without
        a deadline, sockets that never authenticate were each held for the whole idle timeout."""
        await asyncio.sleep(seconds)
        if not self.authenticated:
            await self._refuse(f"not authenticated within {seconds:g} s of opening")

    # -- evaluations ------------------------------------------------------------------------------

    def _evaluation_start(self, message: dict[str, Any], *, size: int, admitted: Admitted | None) -> None:
        """Start the evaluation's task; it takes over the admission the message was read under, if any."""
        eid = evaluation_id_check(message=message)
        key = _id_key(eid)
        if key in self.in_flight:
            raise StreamError(
                409, "conflict", f"evaluation {value_quoted(eid)} is already in flight on this socket", eid=eid
            )
        limit = settings.OPENJEV.stream_max_in_flight
        if len(self.in_flight) >= limit:
            raise StreamError(
                429,
                "too_many_in_flight",
                f"{limit} evaluations are in flight on this socket; wait for one to end",
                eid=eid,
            )
        body = {k: v for k, v in message.items() if k not in ("id", "type")}
        taken = None if admitted is None else Admitted(held=admitted.held.pop_all(), admission=admitted.admission)
        task = asyncio.create_task(
            self._evaluate(eid=eid, key=key, body=body, size=size, admitted=taken), name=f"openjev-stream-{key[:40]}"
        )
        if taken is not None:
            task.add_done_callback(functools.partial(_release_unless_taken, admitted=taken))
        self.in_flight[key] = task

    def _cancel(self, message: dict[str, Any]) -> None:
        """Cancel an evaluation in flight; one that already ended (a cancel racing its `done`) is left be."""
        key = _id_key(evaluation_id_check(message=message))
        task = self.in_flight.get(key)
        if task is not None:
            self.cancelled.add(key)
            task.cancel(CANCEL_REASON)

    async def _evaluate(
        self, *, eid: Any, key: str, body: dict[str, Any], size: int, admitted: Admitted | None
    ) -> None:
        if admitted is not None:
            admitted.taken = True
        request_id = request_id_assign(path=STREAM_PATH)

        def on_answer(answer: Answer) -> None:
            self._send_soon(
                {"type": "answer", "id": eid, "question_id": answer.question_id, "answer": answer_render(answer=answer)}
            )

        address = self.address
        status = CLIENT_CLOSED
        with (
            request_id_bound(request_id=request_id),
            client_address_bound(address=address),
            meter_open(
                api=STREAM_API, route=STREAM_PATH, name=f"WS {STREAM_PATH}", headers=self.scope.get("headers", ())
            ) as meter,
        ):
            meter_caller(label=self.caller.label if self.caller is not None else "")
            try:
                async with contextlib.AsyncExitStack() if admitted is None else admitted.held as held:
                    if admitted is None:
                        with phase_timed("admission"):
                            admission = await held.enter_async_context(
                                request_admitted(caller=self.caller, address=address)
                            )
                    else:
                        admission = admitted.admission
                    served = await systemone_evaluate(
                        data=body,
                        size=size,
                        request_id=request_id,
                        caller=self.caller,
                        admission=admission,
                        on_answer=on_answer,
                    )
            except asyncio.CancelledError as exc:
                if key in self.cancelled:  # the client's cancel; a socket that closed hears nothing more
                    status = self._error_send(eid=eid, request_id=request_id, exc=exc)
            except Exception as exc:
                status = self._error_send(eid=eid, request_id=request_id, exc=exc)
            else:
                status = 200
                usage = served.outcome.usage
                self._send_soon(
                    {
                        "type": "done",
                        "id": eid,
                        "request_id": request_id,
                        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
                    }
                )
            finally:
                meter_close(meter=meter, status=status)
                self.in_flight.pop(key, None)
                self.cancelled.discard(key)
                self.last_activity = asyncio.get_running_loop().time()
                self.settled.set()

    def _error_send(self, *, eid: Any, request_id: str, exc: BaseException) -> int:
        """Send the evaluation's error; its status."""
        status, detail = exception_detail(exc)
        self._send_soon({"type": "error", "id": eid, "request_id": request_id, "status": status, "detail": detail})
        return status

    # -- writing, idleness, closing ---------------------------------------------------------------

    def _send_soon(self, message: dict[str, Any]) -> None:
        """Messages leave in the order they are queued: an evaluation's answers before its `done`."""
        if not self.closing:
            self.outbox.put_nowait(message)

    async def _write(self) -> None:
        try:
            while (message := await self.outbox.get()) is not None:
                await self.send_json(message)
        except Exception as exc:  # the connection broke under a send: the disconnect follows
            log.info("stream socket: sending failed (%r); dropping the rest", exc)

    async def _watch_idle(self) -> None:
        """Close a socket that has been silent, with nothing in flight, for the idle timeout."""
        timeout = settings.OPENJEV.stream_idle_timeout
        loop = asyncio.get_running_loop()
        while True:
            idle = loop.time() - self.last_activity
            if idle >= timeout and not self.in_flight:
                await self._close(code=CLOSE_IDLE, reason=f"idle for {timeout:g} s")
                return
            self.settled.clear()
            try:
                async with asyncio.timeout(None if self.in_flight else timeout - idle):
                    await self.settled.wait()
            except TimeoutError:
                pass

    async def _close(self, *, code: int, reason: str) -> None:
        """Send what is queued, then close with `code`; the client's close frame ends the consumer."""
        if self.closing:
            return
        self.closing = True
        for task in self.in_flight.values():
            task.cancel()
        self.outbox.put_nowait(None)
        await self.writer
        await self.close(code=code, reason=reason[:CLOSE_REASON_MAX_CHARACTERS])

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return text_encode(value=content)
