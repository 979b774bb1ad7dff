"""The evaluations of one stream socket: each in a task of its own, through the same service as `POST /v1/systemone`
(admission with its 529, the deadline, storage), so several run at once on one socket; each ends with exactly one
`done` or `error`, and a cancel from the client ends it as 499. A message large enough to be admitted under its key's
limits before it was read hands that admission to the evaluation it starts, so it is admitted once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from api.plumbing.bodies import Body
from api.plumbing.error_responses import exception_detail
from api.plumbing.metering import CLIENT_CLOSED, STREAM_API, meter_caller, meter_close, meter_open, phase_timed
from api.plumbing.ratelimits import Admission, request_admitted
from api.plumbing.requestids import client_address_bound, request_id_assign, request_id_bound
from api.systemone.render import answer_render
from api.systemone.service import systemone_evaluate
from api.systemone.stream_protocol import STREAM_PATH, StreamError, evaluation_id_check, id_key
from api.systemone.stream_socket import StreamSocket, releasing
from inference.errors import value_quoted
from inference.runner import Usage
from inference.scoring import Answer

CANCEL_REASON = "the evaluation was cancelled by the client"
"""Given to the evaluation's task on a cancel: the client and the stored row both read it (499 cancelled)."""


@dataclass
class Admitted:
    """A message's admission under its key's limits, taken before the message was read: what holds it open."""

    held: contextlib.AsyncExitStack
    admission: Admission
    taken: bool = False
    """Whether the evaluation's task started, and so gives the admission back itself when it ends."""


def _release_unless_taken(task: asyncio.Task[None], *, admitted: Admitted) -> None:
    """A task cancelled before its first step never runs its body (the socket closed at once): its admission is
    given back here instead, so its in-flight slot is not held until it expires."""
    if admitted.taken:
        return
    release = asyncio.get_running_loop().create_task(admitted.held.aclose())
    releasing.add(release)
    release.add_done_callback(releasing.discard)


class StreamEvaluations(StreamSocket):
    """The evaluations in flight on one socket: started, cancelled, answered."""

    def _evaluation_start(self, message: dict[str, Any], *, size: int, admitted: Admitted | None) -> None:
        """Start the evaluation's task; it takes over the admission the message was read under, if any."""
        eid = evaluation_id_check(message=message)
        key = id_key(eid)
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
        key = id_key(evaluation_id_check(message=message))
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
                        body=Body(data=body, size=size),
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
                self._done_send(eid=eid, request_id=request_id, usage=served.outcome.usage)
            finally:
                meter_close(meter=meter, status=status)
                self.in_flight.pop(key, None)
                self.cancelled.discard(key)
                self.last_activity = asyncio.get_running_loop().time()
                self.settled.set()

    def _done_send(self, *, eid: Any, request_id: str, usage: Usage) -> None:
        """Send the evaluation's `done`, with what it read and wrote."""
        self._send_soon(
            {
                "type": "done",
                "id": eid,
                "request_id": request_id,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            }
        )

    def _error_send(self, *, eid: Any, request_id: str, exc: BaseException) -> int:
        """Send the evaluation's error; its status."""
        status, detail = exception_detail(exc)
        self._send_soon({"type": "error", "id": eid, "request_id": request_id, "status": status, "detail": detail})
        return status
