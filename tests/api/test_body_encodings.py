"""One rule for every accepted Content-Encoding: a body of several gzip members or zstd frames is read whole,
anything after the last one is a 400 like any corrupt body, the decoded limit (413) holds across them all, and
what a compressed body may decode to is bounded by its own size (413) and its members by a count (400)."""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Callable

import pytest
import zstandard

from api.plumbing.content_encoding import (
    EXPANSION_FREE_BYTES,
    EXPANSION_MAX,
    MEMBERS_MAX,
    BodyTooLarge,
    BodyUndecodable,
    body_decode,
)
from tests.api.helpers import assert_error
from tests.conftest import README_REQUEST
from tests.linear import assert_linear

LIMIT = 2 * 1024 * 1024
"""The service's default body limit, decoded."""

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}
encodings = pytest.mark.parametrize("encoding", list(COMPRESSORS))


def noise(size: int) -> bytes:
    """`size` bytes that compress about twice (hex digits of random bytes): under any expansion bound."""
    return os.urandom(size // 2 + 1).hex().encode()[:size]


def members_of(raw: bytes, *, encoding: str, parts: int) -> bytes:
    """`raw` cut into `parts` pieces, each compressed on its own and the results concatenated."""
    step = -(-len(raw) // parts)
    return b"".join(COMPRESSORS[encoding](raw[start : start + step]) for start in range(0, len(raw), step))


async def post_encoded(api, data: bytes, *, encoding: str):
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
    return await api.post("/v1/systemone", content=data, headers=headers)


@encodings
async def test_a_body_of_several_members_or_frames_is_read_whole(api, fake, encoding):
    raw = json.dumps(README_REQUEST).encode()
    whole = await post_encoded(api, COMPRESSORS[encoding](raw), encoding=encoding)
    split = await post_encoded(api, members_of(raw, encoding=encoding, parts=3), encoding=encoding)
    assert whole.status_code == split.status_code == 200, split.text
    assert split.json()["answers"] == whole.json()["answers"]


@encodings
@pytest.mark.parametrize("trailer", [b"GARBAGE", b"\x00" * 8, b"\x1f"])
async def test_anything_after_the_last_member_or_frame_gets_400(api, fake, encoding, trailer):
    data = members_of(json.dumps(README_REQUEST).encode(), encoding=encoding, parts=2) + trailer
    response = await post_encoded(api, data, encoding=encoding)
    assert_error(response, 400, "invalid_request")
    assert fake.requests == []


@encodings
async def test_a_truncated_last_member_or_frame_gets_400_after_whole_ones(api, fake, encoding):
    data = members_of(json.dumps(README_REQUEST).encode(), encoding=encoding, parts=3)
    response = await post_encoded(api, data[:-2], encoding=encoding)
    assert_error(response, 400, "invalid_request")
    assert "truncated" in response.json()["detail"]["message"] or "corrupt" in response.json()["detail"]["message"]


@encodings
async def test_the_decoded_limit_holds_across_members_each_under_it(api, fake, encoding):
    member = COMPRESSORS[encoding](noise(LIMIT // 2 + 1))
    response = await post_encoded(api, member + member, encoding=encoding)
    assert_error(response, 413, "request_too_large")
    assert fake.requests == []


@encodings
def test_the_limit_is_exact_across_members(encoding):
    """Up to the limit decodes, one byte more is refused, however the bytes are spread over members."""
    raw = noise(LIMIT)
    assert body_decode(data=members_of(raw, encoding=encoding, parts=5), encoding=encoding, limit=LIMIT) == raw
    with pytest.raises(BodyTooLarge):
        body_decode(data=members_of(raw + b"a", encoding=encoding, parts=5), encoding=encoding, limit=LIMIT)


@encodings
def test_a_member_that_is_not_one_is_refused_wherever_it_starts(encoding):
    one = COMPRESSORS[encoding](b'{"a": 1}')
    for data in (b"not compressed" + one, one + b"not compressed" + one):
        with pytest.raises(BodyUndecodable):
            body_decode(data=data, encoding=encoding, limit=LIMIT)


@encodings
def test_a_body_of_more_members_than_allowed_is_refused_at_the_first_one_over(encoding):
    """The count is checked as members are read: thousands of empty ones cost linear time (gzip's stop at the
    first one over; zstd's capped read skims them all in C first)."""
    empty = COMPRESSORS[encoding](b"")
    assert body_decode(data=empty * MEMBERS_MAX, encoding=encoding, limit=LIMIT) == b""
    with pytest.raises(BodyUndecodable, match=f"more than {MEMBERS_MAX} members"):
        body_decode(data=empty * (MEMBERS_MAX + 1), encoding=encoding, limit=LIMIT)

    def work(count: int) -> Callable[[], object]:
        data = empty * count

        def refused() -> None:
            with pytest.raises(BodyUndecodable):
                body_decode(data=data, encoding=encoding, limit=LIMIT)

        return refused

    assert_linear(work, size=1_000)


ARRAYS_STATE = json.dumps({**README_REQUEST, "state": [[]] * 500_000}).encode()
"""The review's repro: 500,000 empty arrays, two megabytes decoded, a few hundred bytes compressed."""


@encodings
async def test_a_body_that_expands_more_than_its_size_allows_gets_413_before_it_is_read(api, fake, encoding):
    data = COMPRESSORS[encoding](ARRAYS_STATE)
    assert len(data) < 8 * 1024 and len(ARRAYS_STATE) < LIMIT
    response = await post_encoded(api, data, encoding=encoding)
    assert_error(response, 413, "request_too_large")
    message = response.json()["detail"]["message"]
    assert f"{EXPANSION_MAX} times its {len(data)}" in message and "uncompressed" in message
    assert fake.requests == []


@encodings
def test_a_body_may_decode_to_its_expansion_bound_and_no_further(encoding):
    """The bound is exact: `EXPANSION_MAX` times the bytes sent, or `EXPANSION_FREE_BYTES`, whichever is more;
    decoding stops at it, so refusing a bomb costs what its compressed size allows, not what it holds."""
    small = b" " * EXPANSION_FREE_BYTES
    assert body_decode(data=COMPRESSORS[encoding](small), encoding=encoding, limit=LIMIT) == small
    with pytest.raises(BodyTooLarge, match="decodes to more than"):
        body_decode(data=COMPRESSORS[encoding](small + b" "), encoding=encoding, limit=LIMIT)
    real = json.dumps({**README_REQUEST, "state": noise(400_000).decode()}).encode()
    assert body_decode(data=COMPRESSORS[encoding](real), encoding=encoding, limit=LIMIT) == real

    def work(size: int) -> Callable[[], object]:
        data = COMPRESSORS[encoding](b"[]," * size)

        def refused() -> None:
            with pytest.raises(BodyTooLarge):
                body_decode(data=data, encoding=encoding, limit=LIMIT)

        return refused

    assert_linear(work, size=80_000)  # in what was sent: a bigger bomb is refused after as many bytes


@encodings
async def test_a_large_compressed_body_is_decoded_off_the_event_loop(api, fake, encoding, monkeypatch):
    """Decoding two megabytes is milliseconds of C, yet not on the loop every request shares."""
    from api.plumbing import request_body

    threads: list[threading.Thread] = []
    real = request_body.body_decode

    def decode(**kwargs):
        threads.append(threading.current_thread())
        return real(**kwargs)

    monkeypatch.setattr(request_body, "body_decode", decode)
    raw = json.dumps({**README_REQUEST, "state": noise(150_000).decode()}).encode()
    data = members_of(raw, encoding=encoding, parts=8)
    assert len(data) >= 64 * 1024
    response = await post_encoded(api, data, encoding=encoding)
    assert response.status_code == 422  # decoded and read whole: its 150,000 hex digits are too many tokens
    assert [p["type"] for p in response.json()["detail"]] == ["token_limit"]
    assert threads and threading.main_thread() not in threads
