"""Log lines without what a client put in its URL or its headers: query strings and credentials.

A client may put a key in a URL's query string (`/v1/systemone/stream?api_key=…`: a browser cannot set
headers on a WebSocket), and the servers log the whole target: uvicorn every WebSocket handshake
(`uvicorn.error`, always) and every request with `--access-log` (`uvicorn.access`), daphne through
`serve`'s access logger or `runserver`'s `django.channels.server`. The filter sits on the site's log
handler (Django's LOGGING), so every line is rewritten once, whichever logger made it: the query string of
every path becomes `?***`, and an `Authorization` value or a Bearer or Basic credential becomes `***`.
The site's formatter then redacts URL userinfo and the configured secrets (`serving.redaction`).
"""

from __future__ import annotations

import logging
import re

REDACTED = "***"
_QUERY = re.compile(r"(/[^\s?]*)\?\S*?(?=[\"']?(?:\s|$))")
"""A path's query string, up to the whitespace that ends it (a closing quote, as uvicorn writes, is kept)."""
_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;}]+")
_AUTHORIZATION = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?!bearer\b|basic\b)[^\s\"',;}]+")


def log_line_redact(*, line: str) -> str:
    """`line` with every query string and credential replaced by `***`."""
    line = _QUERY.sub(rf"\1?{REDACTED}", line)
    line = _CREDENTIAL.sub(rf"\1 {REDACTED}", line)
    return _AUTHORIZATION.sub(rf"\1{REDACTED}", line)


class LogLineRedaction(logging.Filter):
    """Rewrites a record's message, formatted with its arguments, when it holds a query string or a credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = log_line_redact(line=message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
