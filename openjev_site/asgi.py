"""ASGI entry point: request ids and the body reader in front of Django; WebSockets to channels.

The evaluator is built on first use (any API call, or the load balancer's first `/health` probe), in a
worker thread, so importing the application stays fast and side-effect free.
"""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402  (settings are ready only after get_asgi_application)

from api.batches.uploads import upload_room  # noqa: E402
from api.plumbing.body_lane_admission import request_lane_place  # noqa: E402
from api.plumbing.body_lane_places import LanePlace  # noqa: E402
from api.plumbing.metering import Metering  # noqa: E402
from api.plumbing.ratelimits_store import ratelimits_prepare  # noqa: E402
from api.plumbing.request_body import RequestBodyReader  # noqa: E402
from api.plumbing.requestids import RequestIds  # noqa: E402
from api.plumbing.tracing import tracing_setup  # noqa: E402
from openjev_site.api_handler import evaluating_api_of, path_is_api, path_unprefixed  # noqa: E402
from openjev_site.hosts import HostCheck  # noqa: E402
from openjev_site.sockets import websocket_application  # noqa: E402
from serving.addresses import ForwardedClient  # noqa: E402
from serving.compat import LeanASGIHandler  # noqa: E402

api_application = LeanASGIHandler()
ratelimits_prepare()
tracing_setup()


def _is_api(scope: Any) -> bool:
    return scope["type"] == "http" and path_is_api(scope, script_name=settings.FORCE_SCRIPT_NAME)


async def router(scope: Any, receive: Any, send: Any) -> None:
    """API paths take the lean handler; the admin and the docs keep the full middleware stack."""
    app = api_application if _is_api(scope) else django_application
    await app(scope, receive, send)


def _evaluating_api(scope: Any) -> str | None:
    return evaluating_api_of(scope, script_name=settings.FORCE_SCRIPT_NAME)


async def _upload_room(scope: Any) -> int | None:
    return await upload_room(scope, path=path_unprefixed(scope, script_name=settings.FORCE_SCRIPT_NAME))


async def _lane_place(scope: Any) -> LanePlace | None:
    """An API request's place in the body lane; the admin's and the docs' bodies are not the API's."""
    return await request_lane_place(scope, within=settings.OPENJEV.body_timeout) if _is_api(scope) else None


body_reader = RequestBodyReader(
    router,
    max_bytes=settings.OPENJEV.max_body_bytes,
    read_timeout=settings.OPENJEV.body_timeout,
    room_of=_upload_room,
    place_of=_lane_place,
)
# The request id outermost, so even the host check's and the body reader's refusals carry one; the meter inside
# it, so every answer to an evaluating route is counted with the status the client got, whoever gave it; the host
# is checked before any body is read.
http_application = RequestIds(Metering(HostCheck(body_reader), api_of=_evaluating_api), applies=_is_api)

# WebSockets (the System One stream, the dashboard's live feed) beside HTTP, which is unchanged. The client's
# address (and scheme) from trusted proxies in front of both, so every layer below reads the same one.
application = ForwardedClient(ProtocolTypeRouter({"http": http_application, "websocket": websocket_application()}))
