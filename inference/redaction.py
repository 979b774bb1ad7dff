"""URL credentials out of text, in the Django-free core.

Logs, stored errors and the config dump are redacted where text leaves the process
(`evaluations.redaction`, which applies this rule and the configured secrets). The core redacts
only where it cuts backend text to length: a cut can split `user:secret@` from its `@`, after which
no rule can recognise it.
"""

from __future__ import annotations

import re

REDACTED = "***"

# The userinfo of any URL, up to its last `@` before the path: passwords may contain `@`.
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#]*@")


def url_credentials_redact(*, text: str) -> str:
    """`scheme://user:secret@host` becomes `scheme://***@host` anywhere in `text`."""
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", text)
