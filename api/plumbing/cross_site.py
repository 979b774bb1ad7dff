"""No page on another website may make this service act: the refusals of a request a browser sent from another
origin, or of a body a browser could send cross-site without asking first. Every view that evaluates, labels, stores
or stops something calls them before it reads the body (`api.views.ApiView`, the batch routes)."""

from __future__ import annotations

from rest_framework.request import Request

from api.plumbing.api_error import ApiError
from api.plumbing.multipart import is_multipart
from serving.hosts import origin_same


def cross_site_refused(request: Request, *, content_type: str, multipart: bool) -> None:
    """No page on another website may make this service evaluate, label or store: a browser sends a form or
    `text/plain` body cross-site without asking first, so a body must say it is JSON (which a browser sends
    cross-site only after a preflight this server never grants), and a request a browser marks as coming from
    another origin is refused whatever its type. Clients that are not browsers send no `Origin`. The Origin is
    compared with the host `ALLOWED_HOSTS` validated (a rebound name never gets this far), scheme and port
    included."""
    origin_refused(request)
    media = content_type.partition(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json") or (multipart and is_multipart(content_type)):
        return
    raise ApiError(
        415,
        "unsupported_media_type",
        f"send the body as JSON with Content-Type: application/json (got {media or 'no Content-Type'})",
    )


def origin_refused(request: Request) -> None:
    """A request a browser marks as coming from a web page of another origin is refused (403), whatever it is."""
    origin = request.headers.get("Origin")
    if origin is not None and not origin_same(
        origin=origin, scheme=request._request.scheme or "", host=request._request.get_host()
    ):
        raise ApiError(403, "permission_denied", "requests from a web page of another origin are refused")
