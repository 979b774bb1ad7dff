"""Per-key limits hold under pressure: tokens are reserved once counted, before any backend work, so concurrent
requests never read more than the key's tokens per minute; every request counts against the request limit before
its body is read, invalid ones too; 0 pauses a key; a Redis that hangs is down, for every throttle."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import Iterator

import pytest

from api.decisions.openapi_examples import DECISIONS_REQUEST
from audit.keys import apikey_issue
from audit.models import ApiKey
from tests.conftest import README_REQUEST
from tests.database import db
from tests.ratelimits.conftest import assert_limited

LONG_STATE = " ".join(f"Line {i}: the parcel for order {4400 + i} is late and the invoice is wrong." for i in range(60))


def long_request() -> dict[str, object]:
    """Three questions over a state of about a thousand tokens: about 4,000 prompt tokens in all."""
    return {**README_REQUEST, "state": LONG_STATE}


@pytest.mark.parametrize("where", ["memory", "redis"])
async def test_concurrent_requests_never_read_more_tokens_than_the_keys_limit(api, fake, limit, redis_counts, where):
    limit(key_tokens_per_minute=20_000, redis_url=redis_counts if where == "redis" else None)
    fake.delay = 0.3  # all twelve are in flight together
    answers = await asyncio.gather(*(api.post("/v1/systemone", json=long_request()) for _ in range(12)))
    answered = [a for a in answers if a.status_code == 200]
    read = sum(a.json()["usage"]["input_tokens"] for a in answered)
    each = answered[0].json()["usage"]["input_tokens"]
    assert read <= 20_000 and len(answered) == 20_000 // each, (read, each)
    for refused in (a for a in answers if a.status_code != 200):
        assert_limited(refused, counted="tokens")


async def test_a_request_larger_than_the_whole_token_limit_is_refused_as_too_large(api, fake, limit):
    limit(key_tokens_per_minute=300)
    calls = fake.generate_calls
    systemone = await api.post("/v1/systemone", json=README_REQUEST)
    decisions = await api.post("/v1/decisions", json=DECISIONS_REQUEST)
    assert systemone.status_code == 429 and "Request too large" in systemone.json()["detail"]["message"]
    assert decisions.status_code == 429 and decisions.headers["x-should-retry"] == "false"
    assert decisions.json()["error"]["message"].startswith("Request too large")
    assert systemone.headers["x-ratelimit-limit-tokens"] == "300"
    assert fake.generate_calls == calls


async def test_invalid_requests_count_against_the_request_limit_and_a_key_over_it_is_not_parsed(
    api, fake, limit, monkeypatch
):
    from api.plumbing import bodies

    parsed: list[int] = []
    parse = bodies.body_parse

    def counted(raw: bytes) -> object:
        parsed.append(len(raw))
        return parse(raw)

    monkeypatch.setattr(bodies, "body_parse", counted)
    limit(key_requests_per_minute=5)
    invalid = {**README_REQUEST, "questions": {"q": {"type": "box"}}}
    statuses = [(await api.post("/v1/systemone", json=invalid)).status_code for _ in range(10)]
    assert statuses == [422] * 5 + [429] * 5
    assert len(parsed) == 5  # the bodies over the limit were never read


async def test_a_body_that_is_not_json_counts_against_the_request_limit(api, fake, limit):
    limit(key_requests_per_minute=2)
    headers = {"Content-Type": "application/json"}
    statuses = [(await api.post("/v1/decisions", content=b"{not json", headers=headers)).status_code for _ in range(3)]
    assert statuses == [400, 400, 429]


async def test_feedback_counts_against_the_request_limit(api, fake, limit):
    limit(key_requests_per_minute=1)
    first = await api.post("/v1/feedback", json={"request_id": "req_x", "question_id": "q", "label": True})
    second = await api.post("/v1/feedback", json={"request_id": "req_x", "question_id": "q", "label": True})
    assert first.status_code == 404  # no such answer stored
    assert_limited(second)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("field", "setting"),
    [
        ("requests_per_minute", "key_requests_per_minute"),
        ("tokens_per_minute", "key_tokens_per_minute"),
        ("concurrency", "key_concurrency"),
    ],
)
async def test_a_key_limit_of_zero_pauses_the_key_and_a_blank_one_takes_the_default(api, fake, limit, field, setting):
    limit(require_api_key=True, **{setting: 1_000_000})
    paused = await db(lambda: apikey_issue(name=f"paused-{uuid.uuid4().hex[:8]}"))
    default = await db(lambda: apikey_issue(name=f"default-{uuid.uuid4().hex[:8]}"))
    await db(lambda: ApiKey.objects.filter(pk=paused.id).update(**{field: 0}))

    async def status(secret: str) -> tuple[int, dict[str, str], str]:
        response = await api.post(
            "/v1/decisions", json=DECISIONS_REQUEST, headers={"Authorization": f"Bearer {secret}"}
        )
        return response.status_code, dict(response.headers), response.text

    code, headers, text = await status(paused.secret)
    assert code == 429 and "paused" in text and headers["x-should-retry"] == "false", text
    assert (await status(default.secret))[0] == 200


@pytest.fixture
def silent_redis() -> Iterator[str]:
    """A TCP server that accepts connections and never answers: a Redis that hangs. Counts its connections."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def run() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        server.close()


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_a_redis_that_never_answers_is_down_after_the_timeout_then_not_asked(
    api, fake, limit, silent_redis, policy, monkeypatch
):
    from api.plumbing import ratelimits

    asked: list[int] = []
    admit = ratelimits._admit

    async def counted_admit(**kwargs):
        asked.append(1)
        return await admit(**kwargs)

    monkeypatch.setattr(ratelimits, "_admit", counted_admit)
    limit(key_requests_per_minute=10, redis_url=silent_redis, rate_limit_failure=policy, rate_limit_timeout=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    answers = [await api.post("/v1/systemone", json=README_REQUEST) for _ in range(3)]
    assert loop.time() - started < 5  # one timeout, not one per request (nor redis-py's own minutes)
    assert len(asked) == 1  # the two after the timeout did not wait for Redis
    expected = 200 if policy == "open" else 429
    assert [a.status_code for a in answers] == [expected] * 3


@pytest.mark.django_db(transaction=True)
async def test_the_closed_policy_refuses_an_address_that_sent_wrong_keys_while_the_counts_are_down(api, fake, limit):
    limit(require_api_key=True, redis_url="redis://127.0.0.1:1/0", rate_limit_failure="closed")
    good = await db(lambda: apikey_issue(name=f"good-{uuid.uuid4().hex[:8]}"))
    wrong = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": "Bearer oj_wrong_key_1"})
    assert wrong.status_code == 401
    after = await api.post("/v1/systemone", json=README_REQUEST, headers={"Authorization": f"Bearer {good.secret}"})
    assert after.status_code == 429 and after.json()["detail"]["error_type"] == "rate_limits_unavailable"
