"""Google's error shape, on every answer to a Google client on `POST /v1/decisions` that is not a 200, and on every
answer under `/v1beta/` that is not one.

`{"error": {"code", "message", "status", "details"}}`, as Google's APIs write it (`google.rpc.Status` in JSON): `code`
is the HTTP status, `status` its `google.rpc.Code` name, and `details` typed entries: an `ErrorInfo` whose `reason`
names the error for programs (Gemini's `API_KEY_INVALID` for a wrong key), a `BadRequest` listing every field at
fault (`fieldViolations`), a `RetryInfo` with the wait the server asked for, and a `RequestInfo` with the request
id (the id in the response's header, which finds the stored row and the log line). An invalid request is a 400
(Google's API has no 422).

`google-genai` reads only the status (`google.genai._interactions.BadRequestError`, ...; the body is in the
exception), and retries 408, 409, 429 and every 5xx four times, waiting exactly what `Retry-After` or
`retry-after-ms` says, with no upper bound: so the header this shape sends is cut to `RETRY_AFTER_MAX_SECONDS`
(the SDK's own backoff is of that order), and the full wait is in the body's `RetryInfo` for a caller that wants it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.checking.json_body import BodyNotJson, Loc
from api.plumbing.api_error import PROBLEMS_SHOWN_MAX, ApiError
from api.plumbing.error_responses import RETRIED, RETRY_AFTER
from api.plumbing.formats import ErrorShape
from api.plumbing.requestids import request_id_current
from inference.errors import loc_bounded

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}
"""`google.rpc.Code` by HTTP status, as Google maps them; any other 4xx is `INVALID_ARGUMENT`, any other 5xx
`INTERNAL`. A 502 (the backend failed this request) is `INTERNAL`, not `UNAVAILABLE`: a retry would fail again."""
REASONS = {"authentication_error": "API_KEY_INVALID"}
"""`ErrorInfo.reason` where Google's own differs from our error type upper-cased."""
DOMAIN = "openjev"
"""`ErrorInfo.domain`: the service that names the reason."""
RETRY_AFTER_MAX_SECONDS = 2
"""The longest `Retry-After` sent: google-genai waits what it says before each of its four retries, however long."""
TYPE_PREFIX = "type.googleapis.com/google.rpc."


def field_of(*, loc: Loc) -> str:
    """A problem's location in the body as Google names a field: `questions.team.criteria`, `input[1].data`."""
    if not loc:
        return ""
    head, *rest = loc_bounded(loc)
    text = str(head)
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def status_name(status: int) -> str:
    return STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


def retry_delay(headers: Mapping[str, str]) -> str | None:
    """The wait an error's own headers ask for, as a `google.protobuf.Duration` in JSON (`12s`, `0.250s`)."""
    found = {name.lower(): value for name, value in headers.items()}
    if "retry-after-ms" in found and found["retry-after-ms"].isdigit():
        ms = int(found["retry-after-ms"])
    elif "retry-after" in found and found["retry-after"].isdigit():
        ms = int(found["retry-after"]) * 1000
    else:
        return None
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms // 1000}.{ms % 1000:03d}s"


class GoogleShape(ErrorShape):
    def status(self, error: ApiError) -> int:
        return 400 if error.status == 422 else error.status

    def body(self, error: ApiError, *, message: str) -> dict[str, Any]:
        status = self.status(error)
        details: list[dict[str, Any]] = [
            {
                "@type": f"{TYPE_PREFIX}ErrorInfo",
                "reason": REASONS.get(error.error_type, error.error_type.upper()),
                "domain": DOMAIN,
            }
        ]
        if error.problems:
            details.append(
                {
                    "@type": f"{TYPE_PREFIX}BadRequest",
                    "fieldViolations": [
                        {"field": field_of(loc=p.loc), "description": p.msg, "reason": p.type}
                        for p in error.problems[:PROBLEMS_SHOWN_MAX]
                    ],
                }
            )
        own = dict(error.headers)
        if error.status in RETRY_AFTER and not any(name.lower() == "retry-after" for name in own):
            own["retry-after"] = RETRY_AFTER[error.status]  # what `api.plumbing.error_responses.error_response` adds
        delay = retry_delay(own)
        if delay is not None:
            details.append({"@type": f"{TYPE_PREFIX}RetryInfo", "retryDelay": delay})
        request_id = request_id_current()
        if request_id is not None:  # what a caller quotes to operators, also in the response's header
            details.append({"@type": f"{TYPE_PREFIX}RequestInfo", "requestId": request_id})
        return {"error": {"code": status, "message": message, "status": status_name(status), "details": details}}

    def headers(self, error: ApiError, *, status: int) -> dict[str, str]:
        # Not read by google-genai (it retries by status), but true, and what every client of the path is told.
        return {"x-should-retry": "true" if status in RETRIED else "false"}

    def headers_sent(self, headers: Mapping[str, str]) -> dict[str, str]:
        sent = dict(headers)
        for name, value in headers.items():
            if name.lower() == "retry-after" and value.isdigit():
                sent[name] = str(min(int(value), RETRY_AFTER_MAX_SECONDS))
            elif name.lower() == "retry-after-ms" and value.isdigit():
                sent[name] = str(min(int(value), RETRY_AFTER_MAX_SECONDS * 1000))
        return sent

    def json_invalid(self, exc: BodyNotJson) -> ApiError:
        return ApiError(400, "invalid_json", f"Invalid JSON payload received. {exc}")


GOOGLE_SHAPE = GoogleShape()
