"""What an error is before its route gives it a shape: `ApiError`, and the located problems of a 422 as the plain
shape lists them. Below the shapes (`api.plumbing.formats`) and the renderer (`api.plumbing.error_responses`),
which both read it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference.errors import Problem, loc_bounded, problems_line

BODY = "body"
"""Where a System One problem's location starts: the core locates problems within the request."""


class ApiError(Exception):
    """An error response, before it is given a shape.

    `internal` is what operators get instead (log, stored row) when `message` is kept generic;
    `problems` are a 422's validation problems, located within the body."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        headers: dict[str, str] | None = None,
        *,
        internal: str = "",
        problems: Sequence[Problem] = (),
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = headers or {}
        self.internal = internal
        self.problems = tuple(problems)
        self.param = param
        """The field at fault, as OpenAI's errors name it (`questions[2].choices`)."""


PROBLEMS_SHOWN_MAX = 50
"""Problems a 422 lists; then one entry says how many more there were (a body can hold thousands)."""


def problems_render(problems: Sequence[Problem]) -> list[dict[str, Any]]:
    """FastAPI's `detail` list: each location under `body`, keys cut to what an error quotes of a value."""
    shown = [{"loc": [BODY, *loc_bounded(p.loc)], "msg": p.msg, "type": p.type} for p in problems[:PROBLEMS_SHOWN_MAX]]
    more = len(problems) - PROBLEMS_SHOWN_MAX
    if more > 0:
        shown.append({"loc": [BODY], "msg": f"and {more} more problems of the same request", "type": "more_problems"})
    return shown


def problems_text(problems: Sequence[Problem]) -> str:
    """The problems as one line (`body.questions.q.type: ...; ...`), for a message or the log."""
    return problems_line(problems, root=(BODY,))


def body_invalid(*, message: str, error_type: str, position: int | None = None) -> ApiError:
    """A body that is not the JSON (or multipart) it claims to be: a 422 in the validation shape, located
    at `["body", position]` as FastAPI and the jevcompat suite locate `json_invalid`."""
    loc = () if position is None else (position,)
    return ApiError(422, "validation_error", message, problems=[Problem(loc, message, error_type)])
