"""Issued API keys. Storage of issued keys arrives with the admin; until then only the env key exists."""

from __future__ import annotations


async def apikey_verify(*, secret: str) -> str | None:
    """The key's label if `secret` is an active issued key, else None."""
    return None
