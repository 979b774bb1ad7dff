"""URL credentials and image bytes out of text, in the Django-free core.

Logs, stored errors and the config dump are redacted where text leaves the process
(`serving.redaction`, which applies this rule and the configured secrets). The core redacts
only where it cuts backend text to length: a cut can split `user:secret@` from its `@`, after which
no rule can recognise it.
"""

from __future__ import annotations

import re

REDACTED = "***"

# The userinfo of any URL, up to its last `@` before the path: passwords may contain `@`. The match starts at
# `://` (after a scheme character), never at the scheme's first letter: a pattern that starts at the scheme tries
# every letter of a long word as a scheme, which is quadratic in the word, and every log line passes here.
_URL_USERINFO = re.compile(r"(?<=[A-Za-z0-9+.\-])(://)[^\s/?#]*@")


def url_credentials_redact(*, text: str) -> str:
    """`scheme://user:secret@host` becomes `scheme://***@host` anywhere in `text`, in time linear in `text`:
    each match runs from one `://` to the end of its authority, and an authority holds no `/`, so no two
    attempts read the same characters twice."""
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", text) if "://" in text else text


# A `data:` URL's payload: SGLang quotes the first 100 characters of an image it could not load.
_DATA_URL_PAYLOAD = re.compile(r"\b(data:[A-Za-z0-9.+/-]*(?:;[A-Za-z0-9=.+-]*)*,)[A-Za-z0-9+/=%._~-]*")


def backend_text_redact(*, text: str) -> str:
    """Backend text as it may be logged and stored: no URL credentials, no image bytes (`data:…,***`)."""
    return _DATA_URL_PAYLOAD.sub(rf"\1{REDACTED}", url_credentials_redact(text=text))
