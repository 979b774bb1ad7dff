"""The body lane is shared per caller: one key flooding it with its most expensive bodies waits on its own share,
its surplus unread, and another key's large bodies are read in their turn, answered normally (the review's repro:
24 loops of a 2 MB body of 150,000 unknown fields left another key's 87 KB body 529 sixteen times in
seventeen)."""

from __future__ import annotations

import asyncio
import functools
import json
import time
import uuid
from dataclasses import replace

import pytest

from api.classify.openapi import CLASSIFY_REQUEST
from api.decisions.openapi_examples import DECISIONS_REQUEST
from api.google.openapi import GOOGLE_REQUEST, V1BETA_PATH
from api.plumbing import body_lane
from api.plumbing.body_lane_places import body_lane_place_awaited, lane_counts, place_return
from audit.keys import apikey_issue
from tests.conftest import README_REQUEST
from tests.database import db
from tests.observability.helpers import samples_of, total

FLOOD = json.dumps(
    {"model": "jev-latest", "input": "x", "questions": [{"type": "predicate", "instructions": "x"}]}
    | {f"u{i:06d}": 1 for i in range(150_000)},
    separators=(",", ":"),
).encode()
"""Two megabytes of unknown fields on `/v1/decisions`: the most expensive body to read that the review found."""
LARGE = {**README_REQUEST, "state": "The parcel for my order is late and the invoice is wrong. " * 1_500}
"""About 87 KB of prose (over the 64 KiB at which a body is read in the lane), well under the token budget."""
PROSE = LARGE["state"]
LARGE_OF_ROUTE = {
    "/v1/systemone": (LARGE, "systemone", 200),
    "/v1/decisions": ({**DECISIONS_REQUEST, "input": PROSE}, "decisions", 200),
    V1BETA_PATH: ({**GOOGLE_REQUEST, "input": PROSE}, "google", 200),
    "/v1/classify": ({**CLASSIFY_REQUEST, "model": "no-such-classifier", "input": [PROSE]}, "classify", 404),
}
"""A body of each route over the lane's threshold, the API it is counted under, and its status (no classifier is
saved here: classify's is parsed, then its classifier not found)."""


RATIO = body_lane.LOOP_SHARE / (1 - body_lane.LOOP_SHARE)
"""The rest after a body, per second it held the interpreter."""


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.django_db(transaction=True)
async def test_a_second_keys_large_bodies_are_answered_while_one_key_floods_the_lane(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True, key_concurrency=64)
    name = uuid.uuid4().hex[:8]
    flooder = await db(lambda: apikey_issue(name=f"flood-{name}"))
    other = await db(lambda: apikey_issue(name=f"other-{name}"))
    assert 1_500_000 < len(FLOOD) < 2 * 1024 * 1024 and len(json.dumps(LARGE)) > body_lane.OFF_LOOP_BYTES
    flooding = True
    statuses: list[int] = []

    async def flood() -> None:
        while flooding:
            response = await api.post(
                "/v1/decisions", content=FLOOD, headers={**bearer(flooder.secret), "Content-Type": "application/json"}
            )
            statuses.append(response.status_code)
            if response.status_code == 529:  # as the SDKs do, though without their backoff
                await asyncio.sleep(0.1)

    loops = [asyncio.create_task(flood()) for _ in range(24)]
    try:
        async with asyncio.timeout(60):
            while not lane_counts()[1]:  # the flood took its share of the lane, and more of its bodies wait unread
                await asyncio.sleep(0.01)
        answers = [await api.post("/v1/systemone", json=LARGE, headers=bearer(other.secret)) for _ in range(5)]
    finally:
        flooding = False
        await asyncio.gather(*loops)
    assert [a.status_code for a in answers] == [200] * 5, [a.text[:200] for a in answers]
    assert 400 in statuses  # what of the flood was read was refused


@pytest.mark.parametrize("path", sorted(LARGE_OF_ROUTE))
async def test_a_large_body_waits_for_the_lane_once_decoded_and_parsed_by_its_format_in_one_turn(api, fake, path):
    """Behind a flood, each turn of the lane is a wait behind the flood's body being read: a body decoded in one turn
    and parsed by its format in another waited twice."""
    body, api_name, status = LARGE_OF_ROUTE[path]
    assert len(json.dumps(body)) > body_lane.OFF_LOOP_BYTES
    before = samples_of((await api.get("/metrics")).text)
    response = await api.post(path, json=body)
    after = samples_of((await api.get("/metrics")).text)
    assert response.status_code == status, response.text[:300]

    def grew(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert grew("openjev_body_lane_wait_seconds_count") == 1
    for phase in ("parse", "validate"):  # the wait and the decoding; the format's parse, in the same turn
        assert grew("openjev_phase_duration_seconds_count", api=api_name, phase=phase) == 1, phase


def cpu_burned(seconds: float) -> float:
    """Holds the interpreter for `seconds` of this thread's CPU, as decoding a huge body does; when it ended."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass
    return time.monotonic()


async def test_the_lane_rests_after_a_body_for_the_loops_share_before_the_same_callers_next() -> None:
    """A body that held the interpreter for 50 ms is followed by a rest long enough that the loop keeps its share
    (`LOOP_SHARE`) before the same caller's next body is started."""
    first = asyncio.create_task(
        body_lane.body_lane_run(work=lambda: cpu_burned(0.05), size=body_lane.OFF_LOOP_BYTES, subject="flood")
    )
    await asyncio.sleep(0.01)  # the first body is being read
    second = body_lane.body_lane_run(work=time.monotonic, size=body_lane.OFF_LOOP_BYTES, subject="flood")
    ended, started = await first, await second
    assert started - ended >= 0.05 * RATIO * 0.9


async def test_another_callers_bodies_are_read_during_a_callers_rest_every_one_of_them() -> None:
    """Behind a flood's body, another caller's bodies, sent one after another as a client sends them, are each read
    as soon as they arrive while the flood rests; the flood's next body waits for its own rest."""
    lane = functools.partial(body_lane.body_lane_run, size=body_lane.OFF_LOOP_BYTES)
    first = asyncio.create_task(lane(work=lambda: cpu_burned(0.05), subject="flood"))
    await asyncio.sleep(0.01)  # the first body is being read
    again = asyncio.create_task(lane(work=time.monotonic, subject="flood"))
    ended = await first
    others = [await lane(work=time.monotonic, subject="other") for _ in range(3)]
    again_started = await again
    assert max(others) < again_started  # every one of them during the flood's rest
    assert again_started - ended >= 0.05 * RATIO * 0.9


async def test_callers_flooding_together_share_the_lanes_share_of_the_interpreter() -> None:
    """Two callers with heavy bodies alternate, and each rests as long as both need to leave the event loop its
    share: the lane holds the interpreter no more than `1 - LOOP_SHARE` of the time between them."""
    lane = functools.partial(body_lane.body_lane_run, size=body_lane.OFF_LOOP_BYTES)
    first = asyncio.create_task(lane(work=lambda: cpu_burned(0.04), subject="one"))
    await asyncio.sleep(0.01)  # the first body is being read
    other = asyncio.create_task(lane(work=lambda: (time.monotonic(), cpu_burned(0.04)), subject="two"))
    again = asyncio.create_task(lane(work=time.monotonic, subject="one"))
    ended = await first
    (other_started, _), again_started = await other, await again
    assert other_started - ended < 0.02  # its turn, not resting
    assert again_started - ended >= 0.04 * body_lane.rest_per_second_held(sharing=2) * 0.9


async def test_a_callers_body_beyond_its_share_waits_for_a_place_it_gives_back_while_another_caller_has_room(
    settings,
) -> None:
    """A place is taken before a body is received: beyond its share, a caller's next body waits (unread) for one of
    its places to be given back, while another caller's body finds room at once."""
    share = max(1, settings.OPENJEV.max_concurrent_requests // 4)
    places = [await body_lane_place_awaited(subject="flood", within=1) for _ in range(share)]
    waiting = asyncio.create_task(body_lane_place_awaited(subject="flood", within=5))
    other = await asyncio.wait_for(body_lane_place_awaited(subject="other", within=5), 0.5)
    await asyncio.sleep(0.05)
    assert not waiting.done()
    place_return(places.pop())
    handed = await asyncio.wait_for(waiting, 1)
    assert handed.subject == "flood"
    for place in [*places, handed, other]:
        place_return(place)
    assert lane_counts() == (0, 0)
