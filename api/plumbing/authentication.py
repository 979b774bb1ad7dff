"""Bearer-key authentication as a DRF authentication class, off by default like the original service.

The key is the `Authorization: Bearer <key>` token, or, on a request with no `Authorization` header, the bare key
in a header an installed format names (`WireFormat.key_header`: Google's SDK sends `x-goog-api-key`).

With auth off, any Authorization header is accepted (the official SDK always sends one) and the
request is anonymous. With auth on, the key must equal the configured key or an active issued key,
compared in constant time; `request.auth` is then the `Caller` recorded with the evaluation.

Checking an issued key may read the database (in a worker thread), so `authenticate` is a coroutine:
`ApiView` awaits it on the event loop instead of letting DRF call it through a thread hop.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from api.plumbing.api_error import ApiError
from api.plumbing.body_lane import lane_subject_bind
from api.plumbing.formats import bare_key_of
from api.plumbing.ratelimits import subject_of
from api.plumbing.ratelimits_bad_keys import bad_key_counted, bad_keys_refused
from api.plumbing.requestids import client_address_current
from audit.callers import Caller
from audit.keys import KeysUnavailable, apikey_verify

ENV_CALLER = Caller(label="env")
"""The caller who sent the environment's key (`OPENJEV_API_KEY`)."""


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def token_of(*, authorization: str | None, api_key: str | None) -> str | None:
    """The key a request sends: its Bearer token, or, with no `Authorization` header, its bare key header."""
    return bearer_token(authorization) if authorization else (api_key or "").strip() or None


def env_key_matches(*, token: str) -> bool:
    """Whether `token` is `OPENJEV_API_KEY` (compared in constant time)."""
    env_key = settings.OPENJEV.api_key
    return env_key is not None and env_key != "" and hmac.compare_digest(token.encode(), env_key.encode())


async def caller_authenticate(*, authorization: str | None, api_key: str | None = None) -> Caller | None:
    """The caller an `Authorization` header names (or, without one, an `x-goog-api-key` header: `api_key`), or
    None while auth is off; raises AuthenticationFailed (401), or a 429 for an address that sent too many wrong
    keys this minute (before any key is compared, the environment's included). The API's views and the WebSocket
    stream (header or `auth` message) both ask this, with the client's address bound
    (`api.plumbing.requestids.client_address_bound`)."""
    if not settings.OPENJEV.auth_required:
        return None
    token = token_of(authorization=authorization, api_key=api_key)
    if token is None:
        raise AuthenticationFailed("missing API key: send Authorization: Bearer <key>")
    address = client_address_current()
    await bad_keys_refused(address=address)  # before any comparison: a refused address learns nothing of a guess
    if env_key_matches(token=token):
        return ENV_CALLER
    try:
        caller = await apikey_verify(secret=token)
    except KeysUnavailable:
        raise ApiError(
            503, "service_unavailable", "API keys cannot be checked right now; retry shortly", {"Retry-After": "5"}
        ) from None
    if caller is None:
        await bad_key_counted(address=address)
        raise AuthenticationFailed("invalid API key")
    return caller


async def caller_peeked(*, authorization: str | None, api_key: str | None = None) -> Caller | None:
    """The caller the request's key names, counting nothing and refusing nothing: None with auth off, without a key,
    for a key not accepted, or while keys cannot be checked. For a decision taken before the view runs (a large
    upload's room, a large body's place in the body lane), whose own check then answers as usual."""
    if not settings.OPENJEV.auth_required:
        return None
    token = token_of(authorization=authorization, api_key=api_key)
    if token is None:
        return None
    if env_key_matches(token=token):
        return ENV_CALLER
    try:
        return await apikey_verify(secret=token)
    except KeysUnavailable:
        return None


async def key_valid(*, authorization: str | None, api_key: str | None = None) -> bool:
    """Whether the request's key would be accepted (always, with auth off), as `caller_peeked` looks."""
    if not settings.OPENJEV.auth_required:
        return True
    return await caller_peeked(authorization=authorization, api_key=api_key) is not None


class BearerKeyAuthentication(BaseAuthentication):
    async def authenticate(self, request: Request) -> tuple[None, Caller] | None:  # type: ignore[override]
        """(no user, the caller), or None while auth is off; raises AuthenticationFailed (401). The request's
        large bodies are read in its key's turn of the body lane from now on (`lane_subject_bind`)."""
        caller = await caller_authenticate(
            authorization=request.headers.get("Authorization"), api_key=bare_key_of(header=request.headers.get)
        )
        if caller is None:
            return None
        lane_subject_bind(subject=subject_of(caller=caller, address=client_address_current()))
        return None, caller

    def authenticate_header(self, request: Any) -> str:
        return "Bearer"
