"""Credentials out of every text an operator or a client may read: logs, stored errors, the config dump.

A backend URL may carry `user:password@`, a database URL always does, and a backend's own error text
may echo a header. Redaction happens where text leaves the process (the log formatter, the stored
error, `config_describe`), not where it is made, so a new message cannot forget it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from inference.redaction import REDACTED, url_credentials_redact

SECRET_MIN_CHARS = 6
"""Configured secrets shorter than this are not searched for: replacing every `abc` in a log would hide
more than it protects (and a key that short protects nothing)."""


def text_redact(*, text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with URL credentials and any of `secrets` replaced by `***`."""
    text = url_credentials_redact(text=text)
    for secret in secrets:
        if secret and len(secret) >= SECRET_MIN_CHARS:
            text = text.replace(secret, REDACTED)
    return text


def configured_secrets() -> tuple[str, ...]:
    """The secrets of the running configuration, or none before settings are ready (early logging)."""
    from django.conf import settings

    config = getattr(settings, "OPENJEV", None) if settings.configured else None
    return config.secrets if config is not None else ()


class RedactingFormatter(logging.Formatter):
    """The log formatter of the whole process (Django's LOGGING): message, arguments and traceback
    are redacted together, after formatting, so no logger or exception text can bypass it."""

    def format(self, record: logging.LogRecord) -> str:
        return text_redact(text=super().format(record), secrets=configured_secrets())
