"""Real image files made here (no imaging library needed): a valid PNG of any size and colour."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(*, width: int = 4, height: int = 4, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A `width` x `height` RGB PNG of one colour, as any decoder reads it."""
    row = b"\x00" + bytes(rgb) * width
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", zlib.compress(row * height))
        + _chunk(b"IEND", b"")
    )
