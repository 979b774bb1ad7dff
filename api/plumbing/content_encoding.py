"""A body's `Content-Encoding` decoded under the body limit, one rule for every encoding.

A compressed body is read whole: every gzip member and every zstd frame in turn (concatenated ones are one body,
as RFC 1952 and zstd's format say), anything after the last one refused like any corrupt body (400), the output
of all of them together capped at the limit (413), so a compression bomb costs at most the limit of memory.

What a compressed body may cost is bounded by what was sent, not only by the limit: it may decode to at most
`EXPANSION_MAX` times its size (or `EXPANSION_FREE_BYTES`, whichever is more), and hold at most `MEMBERS_MAX`
members or frames. Everything the server does with a body before refusing it (parsing, validating, tokenizing)
costs in proportion to the decoded bytes, up to a microsecond a byte for the worst shapes; 274 bytes of zstd
decoding to two megabytes of empty arrays were 0.73 CPU-s before their 422. Real bodies compress 2 to 20 times
(a state of prose 7, a transcript 3, 64 questions 16, a megabyte of log lines 18); only a body made to expand
compresses by hundreds (see docs/security.md).
"""

from __future__ import annotations

import functools
import io
import zlib
from collections.abc import Callable
from typing import Any, Protocol

import zstandard

DECODERS = ("gzip", "x-gzip", "zstd", "identity")
EXPANSION_MAX = 128
"""A compressed body may decode to at most this many times its own size..."""
EXPANSION_FREE_BYTES = 32 * 1024
"""...or to this many bytes, whichever is more: small bodies are cheap to read whatever their ratio."""
MEMBERS_MAX = 64
"""gzip members or zstd frames one body may hold: a client compresses a body as one, a log shipper as a few; a
body of thousands of empty ones is only there to be expensive."""


class BodyTooLarge(Exception):
    """Over the body limit, decoded; `message` says which bound, when it is the expansion's."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or "")
        self.message = message


class BodyUndecodable(Exception):
    pass


class _Member(Protocol):
    """One gzip member's or one zstd frame's decoder: zlib's and zstandard's `decompressobj` alike."""

    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...


_FIRST_WINDOW = 64
_MemberDecode = Callable[[Any, memoryview, int], tuple[_Member, bytes]]


def _members_read(*, data: bytes, member_decode: _MemberDecode, limit: int, name: str) -> bytes:
    """Every member (gzip) or frame (zstd) in turn, so concatenated ones are read whole and anything after the
    last is refused like any corrupt body; the output of all of them together is capped at `limit`.

    Each member is fed a window that doubles from 64 bytes, so what a decoder copies back as `unused_data` at its
    member's end is at most twice that member: linear in the body however its members are sized."""
    view, position, size, parts, members = memoryview(data), 0, 0, [], 0
    while position < len(data):
        members += 1
        if members > MEMBERS_MAX:
            raise BodyUndecodable(f"the {name} body holds more than {MEMBERS_MAX} members; compress it as one")
        member, window = None, _FIRST_WINDOW
        while member is None or not member.eof:
            if position >= len(data):
                raise BodyUndecodable(f"the {name} body is truncated")
            chunk = view[position : position + window]
            member, produced = member_decode(member, chunk, limit - size + 1)
            size += len(produced)
            if size > limit:
                raise BodyTooLarge
            parts.append(produced)  # under its cap, so the decoder took the whole chunk
            position += len(chunk) - len(member.unused_data)
            window *= 2
    return b"".join(parts)


def _gzip_member_decode(member: Any, chunk: memoryview, cap: int) -> tuple[_Member, bytes]:
    """At most `cap` bytes out (zlib stops there, so a bomb costs no more than the limit)."""
    member = member or zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        return member, member.decompress(chunk, cap)
    except zlib.error as exc:
        raise BodyUndecodable(f"the gzip body is corrupt: {exc}") from None


def _zstd_member_decode(
    member: Any, chunk: memoryview, cap: int, *, decompressor: zstandard.ZstdDecompressor
) -> tuple[_Member, bytes]:
    """zstandard's decoder takes no cap: `_decode_zstd` bounds the whole output before this runs. One
    decompressor serves every frame in turn (building one costs more than decoding an empty frame)."""
    member = member or decompressor.decompressobj()
    try:
        return member, member.decompress(chunk)
    except zstandard.ZstdError as exc:
        raise BodyUndecodable(f"the zstd body is corrupt: {exc}") from None


def _decode_gzip(data: bytes, limit: int) -> bytes:
    return _members_read(data=data, member_decode=_gzip_member_decode, limit=limit, name="gzip")


def _decode_zstd(data: bytes, limit: int) -> bytes:
    """zstandard's frame decoder cannot cap its output, so a capped read across the frames bounds it first (and
    refuses anything that is not a frame); the frame-by-frame read then finds a truncated last frame, which the
    capped read cannot tell from a whole one."""
    decompressor = zstandard.ZstdDecompressor()
    try:
        with decompressor.stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
            bounded = len(reader.read(limit + 1))
    except zstandard.ZstdError as exc:
        raise BodyUndecodable(f"the zstd body is corrupt: {exc}") from None
    if bounded > limit:
        raise BodyTooLarge
    member_decode = functools.partial(_zstd_member_decode, decompressor=decompressor)
    return _members_read(data=data, member_decode=member_decode, limit=limit, name="zstd")


def expansion_limit(*, size: int) -> int:
    """The most a compressed body of `size` bytes may decode to (see the module)."""
    return max(EXPANSION_FREE_BYTES, EXPANSION_MAX * size)


def body_decode(*, data: bytes, encoding: str, limit: int) -> bytes:
    """Decode one Content-Encoding, its output capped at `limit` bytes and at `expansion_limit` (BodyTooLarge,
    with a message when it is the expansion's); BodyUndecodable when it is corrupt, truncated, followed by
    anything but another member, or of too many members. No body is no body in any encoding (a GET that carries
    the header of its client's defaults)."""
    if not data or encoding not in ("gzip", "x-gzip", "zstd"):
        return data
    expansion = expansion_limit(size=len(data))
    decode = _decode_zstd if encoding == "zstd" else _decode_gzip
    try:
        return decode(data, min(limit, expansion))
    except BodyTooLarge:
        if expansion >= limit:
            raise
        raise BodyTooLarge(
            f"the {encoding} body decodes to more than {expansion} bytes ({EXPANSION_MAX} times its {len(data)}, "
            f"or {EXPANSION_FREE_BYTES} bytes): send it less compressed, or uncompressed"
        ) from None
