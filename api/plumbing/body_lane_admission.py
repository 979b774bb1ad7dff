"""A request's place in the body lane, taken from its headers before its body is received
(`api.plumbing.body_lane_places`): the place of its key's subject when the key is one the view will accept, else its
client address's, as the lane's turns count them once the view has authenticated it (`subject_of`)."""

from __future__ import annotations

from api.plumbing.authentication import caller_peeked
from api.plumbing.body_lane import OFF_LOOP_BYTES
from api.plumbing.body_lane_places import LanePlace, body_lane_place_awaited
from api.plumbing.formats import bare_key_of
from api.plumbing.ratelimits import subject_of
from api.plumbing.requestids import client_address_current
from serving.asgi_types import Scope, scope_headers


async def request_lane_place(scope: Scope, *, within: float) -> LanePlace | None:
    """The place a request's body will be read on, waited for as `body_lane_place_awaited` says (BodyLaneFull after
    `within` seconds); None for a body declared smaller than the lane's threshold (read in place) and for none. A
    body sent in chunks, of no declared length, may be any size up to the limit, so it takes a place."""
    headers = scope_headers(scope)
    length = headers.get("content-length", "").strip()
    if (length.isdigit() and int(length) < OFF_LOOP_BYTES) or (not length and "transfer-encoding" not in headers):
        return None
    caller = await caller_peeked(authorization=headers.get("authorization"), api_key=bare_key_of(header=headers.get))
    subject = subject_of(caller=caller, address=client_address_current())
    return await body_lane_place_awaited(subject=subject, within=within)
