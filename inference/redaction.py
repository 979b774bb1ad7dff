"""Credentials out of messages: backend URLs may carry `user:secret@`, and the messages that name them
reach logs and stored evaluations."""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def text_redact(*, text: str) -> str:
    """`scheme://user:secret@host` becomes `scheme://***@host` anywhere in `text`."""
    return _USERINFO.sub(r"\1***@", text)
