"""What the shared plumbing knows of a wire format: one `WireFormat` each, read instead of naming formats.

A wire format is one package under `api/` (its view, URLs, OpenAPI, parsing, service, rendering) whose
`FORMAT` says what the plumbing needs: the path it is served on, the shape of its errors, the prefix and headers
of its request ids, the name its calls are stored and counted under, and how to answer a read body. The
project's settings list the packages (`API_WIRE_FORMATS`); `ApiConfig.ready` installs their formats here, and
the errors, the request ids, the body reader, the meter and the views look a path up (`route_of_path`).

Several formats may share a path (OpenAI's and Google's Decisions shapes both post to `/v1/decisions`): the
first installed without a `claims` test is the path's primary format, whose error shape answers before a body is
read unless a request header only another format's clients send announces that one (`announced_by`); the others
claim the bodies that are theirs, and document themselves on the primary's operation (`openapi`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from api.checking.json_body import BodyNotJson
from api.plumbing.api_error import ApiError, body_invalid, problems_render
from audit.apis import api_choices_install

if TYPE_CHECKING:
    from django.http import HttpResponse

    from audit.storage.records import Received

REQUEST_ID_HEADER = "x-typesafe-request-id"
"""The request id's header on every route: the id a client quotes to operators."""


class ErrorShape:
    """How a route writes its errors. This base is the plain shape, `{"detail": ...}` (a 422 lists its located
    problems), which routes of no wire format use too; a format with a shape of its own subclasses it."""

    def status(self, error: ApiError) -> int:
        """The HTTP status the error goes out with (some APIs have no 422)."""
        return error.status

    def body(self, error: ApiError, *, message: str) -> dict[str, Any]:
        if error.problems:
            return {"detail": problems_render(error.problems)}
        return {"detail": {"error_type": error.error_type, "message": message}}

    def headers(self, error: ApiError, *, status: int) -> dict[str, str]:
        """Headers the shape's clients read besides the error's own (a retry hint)."""
        return {}

    def headers_sent(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The headers as they go out, the error's own included: a shape whose clients obey a retry hint without
        bound shortens it here."""
        return dict(headers)

    def json_invalid(self, exc: BodyNotJson) -> ApiError:
        """A body that is not JSON: a 422 located at the character where it breaks, as FastAPI answers."""
        return body_invalid(message=str(exc), error_type="json_invalid", position=exc.position)


Body = Any
"""A read body: its JSON, its size and any multipart image parts (`api.plumbing.bodies.Body`)."""
Serve = Callable[..., Awaitable["HttpResponse"]]
"""What a format does with a read body: (body, request id, caller, the caller's admission) -> the response
(`api.views.Serve` spells the arguments out; the descriptor stays below the views and the limits)."""


@dataclass(frozen=True, kw_only=True)
class FormatCheck:
    """How a format parses a body, with the deployment's limits bound, and what the audit stores of one it could not
    parse: the two things its service tells the shared sequence (`api.plumbing.sequence`) about its bodies."""

    parse: Callable[..., Any]
    """`parse(data=...)` (and any arguments the service binds): the format's request, or raises what its service
    maps to an answer."""
    unparsed: Callable[..., Received]
    """`unparsed(data=...)`: what the audit stores of a body that could not be parsed."""
    parts: bool = False
    """Whether `parse` reads a multipart body's image parts too (`parts=`, a dict by name; None for none)."""

    def body_parse(self, *, data: Any, parts: dict[str, bytes] | None) -> Any:
        """The format's request of a read body: its JSON, and its parts where the format reads them."""
        return self.parse(data=data, parts=parts) if self.parts else self.parse(data=data)


@dataclass(frozen=True, kw_only=True)
class WireFormat:
    name: str
    """The format's name where calls are stored (`Evaluation.api`), counted (metrics' `api`) and traced."""
    label: str
    """What the admin shows for `name` (`Evaluation.api`'s choices are the installed formats' names and labels)."""
    path: str
    """The route it is served on, e.g. `/v1/systemone` (under whatever prefix a gateway mounts the API)."""
    serve: Serve
    check: Callable[[], FormatCheck]
    """How its bodies are parsed under the settings now in force (the builder its service's sequence uses): the
    view parses a body with it in the same turn of the body lane that decoded it, so a large body waits its turn
    once, not once to be decoded and again to be parsed."""
    shape: ErrorShape = field(default_factory=ErrorShape)
    request_id_prefix: str = "req_"
    request_id_headers: tuple[str, ...] = (REQUEST_ID_HEADER,)
    """Headers that carry the request id on this route's responses (its clients' own name for it included)."""
    multipart: bool = False
    """Whether its body may be multipart/form-data (an SDK's image uploads)."""
    system: str | None = None
    """OpenInference's `decision.system` of its calls (the API ecosystem its clients speak), if it is one."""
    claims: Callable[[Any], bool] | None = None
    """For a format sharing its path: whether a parsed body is this format's; None for the path's primary."""
    key_header: str | None = None
    """A request header (lowercase) its clients send the API key in, bare, instead of `Authorization: Bearer`
    (Google's `x-goog-api-key`): read as the key on any route when a request has no `Authorization` header."""
    announced_by: str | None = None
    """For a format sharing its path: a request header (lowercase) only its clients send, which puts what is
    answered before the body is read (auth, limits, the body reader's refusals) in this format's error shape; once
    the body is read, the body decides (`claims`)."""
    openapi: Callable[[dict[str, Any]], None] | None = None
    """What the format writes into the OpenAPI document itself, called on the generated document
    (`api.openapi.document.schema_postprocess`): a format sharing its path has no operation of its own, and
    documents its bodies as alternatives on the primary's."""
    models: Callable[[], Awaitable[list[str]]] | None = None
    """Model names it serves besides the language model (`GET /v1/models` lists them: saved classifiers)."""
    limits: Callable[[], dict[str, int]] | None = None
    """What one of its requests may ask where its rules differ from the shared ones (`GET /v1/limits`, under
    its name)."""
    own_path: str | None = None
    """A path where this format is the primary one, besides `path` (which it may share): Google's
    `/v1beta/decisions`, where its clients post by default."""
    family: tuple[str, ...] = ()
    """Path prefixes of no format whose answers, a 404 for a path no route serves included, are in this format's
    error shape (`route_shapes_install`): the other routes its clients call (`/v1beta/` for Google's)."""


@dataclass(frozen=True)
class Route:
    """The formats served on one path: the primary first."""

    path: str
    formats: tuple[WireFormat, ...]

    @property
    def primary(self) -> WireFormat:
        return self.formats[0]

    def format_of(self, *, data: Any) -> WireFormat:
        """The format a parsed body is written in: the first that claims it, else the primary."""
        return next((f for f in self.formats[1:] if f.claims is not None and f.claims(data)), self.primary)

    def format_announced(self, *, has_header: Callable[[str], bool]) -> WireFormat:
        """The format whose shape answers before the body is read: the first whose `announced_by` header the
        request carries, else the primary."""
        return next(
            (f for f in self.formats[1:] if f.announced_by is not None and has_header(f.announced_by)), self.primary
        )


_routes: dict[str, Route] = {}


def wire_formats_install(*, formats: Sequence[WireFormat]) -> None:
    """Serve `formats` (in order: a path's primary before the formats that share it), each also on its own path and
    with its family's routes in its shape."""
    _routes.clear()
    api_choices_install(choices=[(f.name, f.label) for f in formats])
    for wire_format in formats:
        found = _routes.get(wire_format.path)
        if found is None:
            if wire_format.claims is not None:
                raise ValueError(f"{wire_format.name} shares {wire_format.path}, whose primary format is not installed")
            _routes[wire_format.path] = Route(wire_format.path, (wire_format,))
        else:
            _routes[wire_format.path] = Route(found.path, (*found.formats, wire_format))
    for wire_format in formats:
        if wire_format.own_path is not None:
            _routes[wire_format.own_path] = Route(wire_format.own_path, (wire_format,))
        route_shapes_install(prefixes=wire_format.family, shape=wire_format.shape)


def wire_formats() -> tuple[WireFormat, ...]:
    """Every installed format, once (one served on a path of its own too is listed where it first appears)."""
    return tuple({id(f): f for route in _routes.values() for f in route.formats}.values())


def route_of_path(path: str) -> Route | None:
    """The route a request path is for, under whatever prefix a gateway mounts the API (the path ends with the
    route); None for a path no format serves."""
    for route_path, route in _routes.items():
        if path.endswith(route_path):
            return route
    return None


_route_shapes: dict[str, ErrorShape] = {}


def route_shapes_install(*, prefixes: Sequence[str], shape: ErrorShape) -> None:
    """Routes of no wire format whose errors are in one format's shape (OpenAI's Files and Batches routes): every
    answer on a path under `prefixes` (`/v1/files`, `/v1/files/{id}`, ...; a prefix that ends with `/`, every path
    strictly below it, not the prefix itself), the body reader's and the URL resolver's included, is written in
    `shape`."""
    _route_shapes.update(dict.fromkeys(prefixes, shape))


def shape_of_route(path: str) -> ErrorShape | None:
    """The shape `route_shapes_install` gave the routes `path` is under (whatever prefix a gateway mounts the API
    under), if any."""
    for prefix, shape in _route_shapes.items():
        at = path.find(prefix)
        rest = path[at + len(prefix) :] if at >= 0 else None
        if rest is not None and (rest[:1] in ("", "/") if not prefix.endswith("/") else rest != ""):
            return shape
    return None


def bare_key_of(*, header: Callable[[str], str | None]) -> str | None:
    """The API key a request sends in an installed format's own key header (`WireFormat.key_header`), if any;
    `header` looks a request header up by its lowercase name."""
    for wire_format in wire_formats():
        if wire_format.key_header is not None and (value := header(wire_format.key_header)):
            return value
    return None


def wire_format_named(name: str) -> WireFormat | None:
    return next((f for f in wire_formats() if f.name == name), None)
