"""The classes of hostile request `bench/hostile.py` sends. Each takes the server (`Target`: its URL and the keys
issued for the run) and returns what the client saw and how many bytes it put on the wire: the request line, the
headers and the body (a socket: its handshake and its frames), which is what a class's server CPU is held against.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import zstandard

KEY = "hostile-bench-key-" + "k" * 24
QUESTION = {"q": {"type": "noul", "instructions": "x"}}
README_QUESTION = {"refund": {"type": "noul", "instructions": "Is the customer asking for money back?"}}
ARRAYS_STATE: list[list[object]] = [[]] * 500_000
"""The review's state: 500,000 empty arrays, two megabytes of JSON, a few hundred bytes compressed."""
FRAME_OVERHEAD = 14
"""A client's WebSocket frame header at most (length and mask) besides its payload."""


@dataclass(frozen=True)
class Target:
    url: str
    keys: Mapping[str, str] = field(default_factory=dict)
    """Keys issued for the run by name: `limited` (one request a minute), `flood` and `other` (the lane's check)."""


@dataclass(frozen=True)
class Sent:
    status: int | str
    size: int
    """Bytes on the wire: request line, headers and body (a socket: its handshake and its frames)."""
    seconds: float


Attack = Callable[[Target], Sent]


def request_bytes(request: httpx.Request) -> int:
    """What an HTTP/1.1 request puts on the wire: its request line, its headers and its body."""
    line = len(request.method) + len(request.url.raw_path) + len(" HTTP/1.1\r\n") + 1
    headers = sum(len(name) + len(value) + 4 for name, value in request.headers.raw) + 2
    return line + headers + len(request.content)


def post(
    target: Target, path: str, body: bytes, *, headers: Mapping[str, str] | None = None, key: str | None = KEY
) -> Sent:
    sent = {
        "Content-Type": "application/json",
        **({"Authorization": f"Bearer {key}"} if key else {}),
        **(headers or {}),
    }
    start = time.perf_counter()
    with httpx.Client(timeout=600) as client:
        request = client.build_request("POST", target.url + path, content=body, headers=sent)
        try:
            status: int | str = client.send(request).status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
    return Sent(status=status, size=request_bytes(request), seconds=time.perf_counter() - start)


def systemone(state: Any, **extra: Any) -> bytes:
    return json.dumps({"model": "jev-latest", "questions": QUESTION, "state": state, **extra}).encode()


_bodies: dict[str, bytes] = {}


def _body(name: str, build: Callable[[], bytes]) -> bytes:
    """`build()` once per class `name`: a class is sent again and again, and building two megabytes of JSON (and
    compressing them) is the client's CPU, not what is measured."""
    if name not in _bodies:
        _bodies[name] = build()
    return _bodies[name]


def image_urls(target: Target) -> Sent:
    """The review's repro: 500 URLs of 4,096 characters that end in a space (2 MB)."""
    return post(
        target,
        "/v1/systemone",
        _body("image_urls", lambda: systemone({"text": "x", "images": ["http://" + "a" * 4088 + " "] * 500})),
    )


def assets(target: Target) -> Sent:
    """20,000 asset placeholders over a 200,000-character state made of their common beginning."""

    def build() -> bytes:
        pixel = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()
        placeholders = {f"ph{i:05d}": {"type": "image", "format": "png", "data_base64": pixel} for i in range(20_000)}
        return systemone("ph0" * 66_667, assets=placeholders)

    return post(target, "/v1/systemone", _body("assets", build))


def transcript(target: Target) -> Sent:
    """A chat transcript of 60,000 one-character messages (2 MB)."""
    return post(
        target, "/v1/systemone", _body("transcript", lambda: systemone([{"role": "user", "content": "a"}] * 60_000))
    )


def wide_object(target: Target) -> Sent:
    """A state object of 110,000 keys."""
    return post(target, "/v1/systemone", _body("wide_object", lambda: systemone({f"k{i}": i for i in range(110_000)})))


def surrogates(target: Target) -> Sent:
    """150,000 lone surrogates, each a problem to locate."""
    return post(target, "/v1/systemone", _body("surrogates", lambda: systemone(["\ud800"] * 150_000)))


def deep_nesting(target: Target) -> Sent:
    """A state of 1,000,000 nested arrays (2 MB of brackets): over the nesting limit at the 129th."""
    body = b'{"model": "jev-latest", "questions": {"q": {"type": "noul", "instructions": "x"}}, "state": '
    return post(target, "/v1/systemone", body + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}")


def arrays(target: Target) -> Sent:
    """Round 3: 500,000 empty arrays as the state (2 MB, uncompressed): refused by the token budget."""
    return post(target, "/v1/systemone", _body("arrays", lambda: systemone(ARRAYS_STATE)))


def zstd_arrays(target: Target) -> Sent:
    """Round 3's repro: the same state as 274 bytes of zstd (0.73 CPU-s before): refused by its expansion."""
    data = _body("zstd_arrays", lambda: zstandard.ZstdCompressor(level=19).compress(systemone(ARRAYS_STATE)))
    return post(target, "/v1/systemone", data, headers={"Content-Encoding": "zstd"})


def gzip_garbage(target: Target) -> Sent:
    """Round 3: a gzip body followed by garbage (once read as its first member only, a 200)."""
    data = gzip.compress(systemone("x")) + b"GARBAGE"
    return post(target, "/v1/systemone", data, headers={"Content-Encoding": "gzip"})


def gzip_members(target: Target) -> Sent:
    """Round 3: 50,000 empty gzip members (1 MB), each once a decoder of its own."""
    return post(target, "/v1/systemone", gzip.compress(b"") * 50_000, headers={"Content-Encoding": "gzip"})


def decisions_input(target: Target) -> Sent:
    """OpenAI's input as 60,000 message items."""
    body = {
        "model": "jev-latest",
        "input": [{"role": "user", "content": "a"}] * 60_000,
        "questions": [{"type": "predicate", "instructions": "x"}],
    }
    return post(target, "/v1/decisions", _body("decisions_input", lambda: json.dumps(body).encode()))


def unknown_field(target: Target) -> Sent:
    """A 1 MB unknown field on `/v1/decisions`, which the error names."""
    body = {"model": "jev-latest", "input": "x", "questions": [{"type": "predicate"}], "x" * 1_000_000: 1}
    return post(target, "/v1/decisions", _body("unknown_field", lambda: json.dumps(body).encode()))


FLOOD = json.dumps(
    {"model": "jev-latest", "input": "x", "questions": [{"type": "predicate", "instructions": "x"}]}
    | {f"u{i:06d}": 1 for i in range(150_000)},
    separators=(",", ":"),
).encode()
"""Round 3's lane flood: a 2 MB body of 150,000 unknown fields on `/v1/decisions`."""


def unknown_fields(target: Target) -> Sent:
    """Round 3: the lane flood's body, once."""
    return post(target, "/v1/decisions", FLOOD)


def content_part_type(target: Target) -> Sent:
    """Round 3: a 1 MB `type` in a Decisions content part (once a 1 MB 400)."""
    body = {
        "model": "jev-latest",
        "input": [{"role": "user", "content": [{"type": "x" * 1_000_000}]}],
        "questions": [{"type": "predicate", "instructions": "x"}],
    }
    return post(target, "/v1/decisions", _body("content_part_type", lambda: json.dumps(body).encode()))


def multipart_parts(target: Target) -> Sent:
    """A multipart body of 30,000 empty parts."""
    boundary = "b"
    part = f'--{boundary}\r\nContent-Disposition: form-data; name="p"\r\n\r\n\r\n'
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n\r\n{{}}\r\n' + part * 30_000
    body += f"--{boundary}--\r\n"
    return post(
        target,
        "/v1/systemone",
        body.encode(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )


def zstd_body(target: Target) -> Sent:
    """The image-URL repro compressed with zstd (what the official SDK sends)."""
    state = {"text": "x", "images": ["http://" + "a" * 4088 + " "] * 400}
    data = _body("zstd_body", lambda: zstandard.ZstdCompressor().compress(systemone(state)))
    return post(target, "/v1/systemone", data, headers={"Content-Encoding": "zstd"})


def raw_exchange(target: Target, request: bytes, *, connections: int = 1) -> Sent:
    """`request` sent on `connections` raw sockets at once; the statuses of their first answers."""
    host, port = target.url.removeprefix("http://").split(":")
    statuses: list[str] = []
    start = time.perf_counter()

    def one() -> None:
        with socket.create_connection((host, int(port)), timeout=600) as sock:
            sock.sendall(request)
            statuses.append(sock.recv(64).split(b"\r\n")[0].decode(errors="replace")[9:12])

    threads = [threading.Thread(target=one) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    shown = ",".join(sorted(set(statuses)))
    return Sent(status=shown, size=len(request) * connections, seconds=time.perf_counter() - start)


def long_header(target: Target) -> Sent:
    """A 60 KB Authorization header of repeated `Bearer ` words."""
    with httpx.Client(timeout=600) as client:
        request = client.build_request(
            "GET", target.url + "/v1/models", headers={"Authorization": ("Bearer " * 8_000).strip()}
        )
        start = time.perf_counter()
        status = client.send(request).status_code
    return Sent(status=status, size=request_bytes(request), seconds=time.perf_counter() - start)


def two_hosts(target: Target) -> Sent:
    """Round 3: two Host headers and an Origin (once a 500 DisallowedHost)."""
    host = target.url.removeprefix("http://")
    body = systemone("x")
    request = (
        f"POST /v1/systemone HTTP/1.1\r\nHost: {host}\r\nHost: {host}\r\nOrigin: {target.url}\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    return raw_exchange(target, request + body)


def slash_path_websocket(target: Target) -> Sent:
    """WebSocket upgrades on a path of 8,100 slashes (the access log's redaction), four at once."""
    host = target.url.removeprefix("http://")
    request = (
        f"GET /{'/' * 8100} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    return raw_exchange(target, request, connections=4)


def stream_messages(target: Target, messages: list[str], *, key: str | None) -> Sent:
    """`messages` on one stream socket (with `key` on the upgrade, if any), each answered or the socket closed."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    start, statuses = time.perf_counter(), []
    with connect(
        target.url.replace("http", "ws") + "/v1/systemone/stream",
        additional_headers=headers,
        max_size=None,
        open_timeout=600,
        ping_interval=None,  # a stalled server cannot answer pings: the stall is what is measured
    ) as socket_:
        request = socket_.request
        assert request is not None, "a client connection has sent its handshake"
        handshake = len(request.path) + 16 + sum(len(k) + len(v) + 4 for k, v in request.headers.raw_items())
        try:
            for message in messages:
                socket_.send(message)
                reply = json.loads(socket_.recv(timeout=600))
                statuses.append(str(reply.get("status", reply["type"])))
        except ConnectionClosed as closed:
            statuses.append(str(closed.rcvd.code if closed.rcvd else "closed"))
    size = handshake + sum(len(m.encode()) + FRAME_OVERHEAD for m in messages[: len(statuses)])
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    shown = "/".join(f"{n}x{s}" if n > 1 else s for s, n in counts.items())
    return Sent(status=shown, size=size, seconds=time.perf_counter() - start)


def stream_message(target: Target) -> Sent:
    """The image-URL repro as one message on `/v1/systemone/stream`."""
    state = {"images": ["http://" + "a" * 4088 + " "] * 400}
    message = json.dumps({"id": 1, "model": "jev-latest", "questions": QUESTION, "state": state})
    return stream_messages(target, [message], key=KEY)


def stream_no_key(target: Target) -> Sent:
    """Round 3's repro: with no key, one evaluation message of 500,000 empty arrays (once parsed before the key)."""
    message = _body(
        "stream_no_key",
        lambda: json.dumps({"id": 1, "model": "jev-latest", "questions": QUESTION, "state": ARRAYS_STATE}).encode(),
    )
    return stream_messages(target, [message.decode()], key=None)


def stream_over_limit(target: Target) -> Sent:
    """Round 3's repro: a key of one request a minute sends 30 messages of 2 MB after it (once each parsed)."""
    message = json.dumps({"id": 1, "model": "jev-latest", "questions": QUESTION, "state": "x" * 2_000_000})
    return stream_messages(target, [message] * 30, key=target.keys["limited"])


def wrong_keys(target: Target) -> Sent:
    """300 wrong keys from one address, one after another (the throttle's 429 must come, quickly)."""
    start, size = time.perf_counter(), 0
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=target.url, timeout=600) as client:
        for i in range(300):
            request = client.build_request(
                "GET", "/v1/models", headers={"Authorization": f"Bearer wrong-{i}-" + "w" * 30}
            )
            code = client.send(request).status_code
            size += request_bytes(request)
            statuses[code] = statuses.get(code, 0) + 1
    shown = "/".join(f"{n}x{code}" for code, n in sorted(statuses.items()))
    return Sent(status=shown, size=size, seconds=time.perf_counter() - start)


ATTACKS: dict[str, Attack] = {
    "image_urls": image_urls,
    "assets": assets,
    "transcript": transcript,
    "wide_object": wide_object,
    "surrogates": surrogates,
    "deep_nesting": deep_nesting,
    "arrays": arrays,
    "zstd_arrays": zstd_arrays,
    "gzip_garbage": gzip_garbage,
    "gzip_members": gzip_members,
    "decisions_input": decisions_input,
    "unknown_field": unknown_field,
    "unknown_fields": unknown_fields,
    "content_part_type": content_part_type,
    "multipart_parts": multipart_parts,
    "zstd_body": zstd_body,
    "two_hosts": two_hosts,
    "slash_path_websocket": slash_path_websocket,
    "stream_message": stream_message,
    "stream_no_key": stream_no_key,
    "stream_over_limit": stream_over_limit,
    # Last: a long header's key and the wrong keys put the bench's address over the wrong-key throttle for a minute.
    "long_header": long_header,
    "wrong_keys": wrong_keys,
}
