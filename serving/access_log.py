"""Log lines without what a client put in its URL or its headers: query strings and credentials.

A client may put a key in a URL's query string (`/v1/systemone/stream?api_key=…`: a browser cannot set
headers on a WebSocket), and the servers log the whole target: uvicorn every WebSocket handshake
(`uvicorn.error`, always) and every request with `--access-log` (`uvicorn.access`), daphne through
`serve`'s access logger or `runserver`'s `django.channels.server`. The filter sits on the site's log
handler (Django's LOGGING), so every line is rewritten once, whichever logger made it: the query string of
every path becomes `?***`, and an `Authorization` or `x-goog-api-key` value (Google's SDK sends its key bare
in that header) or a Bearer or Basic credential becomes `***`.
The site's formatter then redacts URL userinfo and the configured secrets (`serving.redaction`).

Every line passes here on the event loop, and a client chooses what its request line holds (a path of eight
thousand slashes, a header of repeated words), so the rewriting is linear in the line: no pattern here can try
the same characters from many starting points. A line is then cut to `LINE_MAX_CHARACTERS`, so neither the log
nor whatever reads it pays for what a client sent at length.
"""

from __future__ import annotations

import logging
import re

from inference.redaction import url_credentials_redact

REDACTED = "***"
LINE_MAX_CHARACTERS = 8192
"""Longer messages are cut to this (after redaction), with a note of how much was cut."""
_WORD = re.compile(r"\S+")
_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;}]+")
_AUTHORIZATION = re.compile(
    r"(?i)((?:authorization|x-goog-api-key)[\"']?\s*[:=]\s*[\"']?)(?!bearer\b|basic\b)[^\s\"',;}]+"
)


def _query_redact(found: re.Match[str]) -> str:
    """One word with its query string (after a path's `?`) as `***`; a closing quote, as uvicorn writes, is kept."""
    word = found.group()
    slash = word.find("/")
    query = word.find("?", slash) if slash >= 0 else -1
    if query < 0:
        return word
    quote = word[-1] if word[-1] in "\"'" and len(word) > query + 1 else ""
    return f"{word[: query + 1]}{REDACTED}{quote}"


def log_line_redact(*, line: str) -> str:
    """`line` with every query string and credential replaced by `***`, then cut to `LINE_MAX_CHARACTERS`."""
    if "?" in line:
        line = _WORD.sub(_query_redact, line)
    line = _CREDENTIAL.sub(rf"\1 {REDACTED}", line)
    line = _AUTHORIZATION.sub(rf"\1{REDACTED}", line)
    if len(line) > LINE_MAX_CHARACTERS:  # credentials first: a cut could split `user:secret@` from its `@`
        line = url_credentials_redact(text=line)
        line = f"{line[:LINE_MAX_CHARACTERS]}… ({len(line) - LINE_MAX_CHARACTERS} more characters not logged)"
    return line


class LogLineRedaction(logging.Filter):
    """Rewrites a record's message, formatted with its arguments, when it holds a query string or a credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = log_line_redact(line=message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
