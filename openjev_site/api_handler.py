"""Which requests are the JSON API's: they take the lean Django ASGI handler (`serving.compat.LeanASGIHandler`,
a framework fork pinned to the Django release it copies), the admin and the docs the full one.

Django adapts every classic middleware to async by hopping to a worker thread twice per request
(process_request/process_response through sync_to_async), and a fresh thread-sensitive executor is
created per request: on the API that was most of the server's CPU per evaluation. The API needs
none of those middlewares (no sessions, cookies, CSRF or messages: it authenticates by Bearer key),
so its handler runs the URL resolver and the async view directly on the event loop.

Django also sends `request_started` and closes the response (which sends `request_finished`) through
`sync_to_async`, two more thread hops per request (about 5 % of the server's CPU on a 64-question
evaluation). Their receivers are Django's own (`reset_queries`, `close_old_connections`, `close_caches`,
`reset_urlconf`), and each touches only what this thread has opened: the API opens no database
connection or cache on the event loop (the database is used in worker threads that close their own
connections, `audit/keys.py`, `calibration/applied.py`), so here they run in place, in
microseconds. A receiver that blocked would stall the loop: `test_api_handler.py` pins the list.
"""

from __future__ import annotations

from typing import Any

from api.plumbing.formats import route_of_path

API_PREFIXES = ("/v1/", "/v1beta/", "/health", "/metrics")


def path_is_api(scope: Any, *, script_name: str | None = None) -> bool:
    """Whether the request is for the API, under the ASGI root path or a forced script name."""
    return path_unprefixed(scope, script_name=script_name).startswith(API_PREFIXES)


def evaluating_api_of(scope: Any, *, script_name: str | None = None) -> str | None:
    """The wire format an HTTP request to one of their routes is counted under (the path's primary format, until
    its body says otherwise); None for any other route."""
    route = route_of_path(path_unprefixed(scope, script_name=script_name))
    return None if route is None else route.primary.name


def path_unprefixed(scope: Any, *, script_name: str | None = None) -> str:
    """The path below the ASGI root path or the forced script name, whichever it starts with."""
    path: str = scope.get("path", "")
    for root in (scope.get("root_path", ""), script_name or ""):
        if root and path.startswith(root):
            return path[len(root.rstrip("/")) :]
    return path
