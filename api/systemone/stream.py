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

The consumer here reads each message; what it is made of has a module each: the socket's state, outbox, idle watchdog
and closing (`stream_socket`), its authentication (`stream_auth`), its evaluations (`stream_evaluations`), and the
protocol's close codes, ids and message decoding (`stream_protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

from django.conf import settings

from api.plumbing.api_error import ApiError
from api.plumbing.body_lane import body_lane_run
from api.plumbing.error_responses import exception_detail
from api.plumbing.ratelimits import request_admitted
from api.systemone.socket_shares import socket_share_return, socket_wait, waiting_subject
from api.systemone.stream_auth import StreamAuthentication
from api.systemone.stream_evaluations import Admitted, StreamEvaluations
from api.systemone.stream_protocol import (
    CLOSE_CROSS_ORIGIN,
    StreamError,
    id_echoed,
    message_decode,
    stream_origin_allowed,
)
from inference.errors import RequestInvalid, value_quoted

UNAUTHENTICATED_MESSAGE_MAX_CHARACTERS = 4096
"""A socket that has not authenticated is read only this far: an auth message is a few dozen characters, and a
larger one is refused (4401) unparsed, so a caller with no key costs the server nothing but the frame."""
ADMITTED_BEFORE_READ_BYTES = 1024
"""A message this large or larger is admitted under its key's limits before it is parsed (an evaluation, nearly
always: an auth or a cancel is under 300 bytes), so a key over its request limit costs no parse; a smaller one,
cheap to read, is admitted once it is known to be an evaluation."""


class SystemOneStreamConsumer(StreamAuthentication, StreamEvaluations):
    """One socket: authentication, the evaluations in flight, an ordered outbox and the idle watchdog."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The socket's share is given back however the consumer ends (closed by either side, or a failure)."""
        self.share = None
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.share is not None:
                socket_share_return(subject=self.share, holder=self)

    async def connect(self) -> None:
        client = self.scope.get("client")
        self.address = str(client[0]) if client else None
        self.caller = None
        self.authenticated = False
        self.in_flight = {}
        self.cancelled = set()
        self.outbox = asyncio.Queue()
        self.closing = False
        self.last_activity = asyncio.get_running_loop().time()
        self.settled = asyncio.Event()
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
            work = functools.partial(message_decode, raw=raw)
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
                eid=id_echoed(message),
            )
