"""The stream's protocol, apart from the socket that speaks it (`api/systemone/stream.py`): its close codes, the
size the ASGI server lets through, the ids a client may give its evaluations, how one message is read, and whose
pages may open the socket. Kept together so the rules a client sees (docs/streaming.md) read in one place.
"""

from __future__ import annotations

import json
from typing import Any

from api.checking.json_body import body_parse, document_problems
from inference.errors import Problem, RequestInvalid
from serving.hosts import origin_same, scope_host

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
TRANSPORT_LIMIT_FACTOR = 2
"""The ASGI server refuses (closes with 1009) a message over this many times the body limit, and hands
anything smaller to the consumer, which answers one over the limit with a 413 error message: a
client gets told, and a runaway client cannot make the server buffer without bound."""


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


def id_echoed(message: dict[str, Any]) -> Any:
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


def message_decode(*, raw: bytes) -> dict[str, Any]:
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


def id_key(eid: Any) -> str:
    """1 and "1" are different ids."""
    return json.dumps(eid)
