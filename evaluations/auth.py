"""Bearer-key authentication, off by default like the original service.

With auth off, any Authorization header is accepted (the official SDK always sends one). With auth
on, the key must equal the configured key or an active issued key, compared in constant time.
"""

from __future__ import annotations

import hmac

from django.conf import settings

from evaluations.errors import ApiError

AUTH_HEADERS = {"WWW-Authenticate": "Bearer"}


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def request_authenticate(*, authorization: str | None) -> str | None:
    """The key label recorded with the evaluation (None when auth is off); raises a 401 ApiError."""
    config = settings.OPENJEV
    if not config.auth_required:
        return None
    token = bearer_token(authorization)
    if token is None:
        raise ApiError(401, "authentication_error", "missing API key: send Authorization: Bearer <key>", AUTH_HEADERS)
    if config.api_key and hmac.compare_digest(token.encode(), config.api_key.encode()):
        return "env"
    from evaluations.keys import apikey_verify

    label = await apikey_verify(secret=token)
    if label is None:
        raise ApiError(401, "authentication_error", "invalid API key", AUTH_HEADERS)
    return label
