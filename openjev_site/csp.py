"""The Content-Security-Policy of the pages served with the full middleware stack: the admin and the docs.

The API's handler has no middleware, so its JSON answers carry no policy (none is needed: they run no
script). Scripts run only from this origin, each inline one by its nonce (the admin's and Swagger UI's
templates write `{% csp_nonce_attr %}`), or by its hash for the Scalar reference page, which is rendered
without a request (so without a nonce): the hash is taken from its template when settings load, so an
edit of that script cannot fall out of step with the policy. Styles may be inline: Scalar and Swagger UI
style their components at run time, and the admin's bars are sized by a style attribute. Requests
(Scalar's "Test Request", Swagger's "Try it out", the dashboard's WebSocket) go to this origin only,
nothing may frame the pages, and forms post here only.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from django.utils.csp import CSP

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
"""A script element with neither a source nor a nonce: its text is the template's, as written."""


def inline_script_hashes(*, template: Path) -> list[str]:
    """The CSP source of each inline script in `template` (`'sha256-…'`); their text holds no template tags."""
    return [
        f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
        for body in _INLINE_SCRIPT.findall(template.read_text())
    ]


def site_policy(*, templates: Path) -> dict[str, list[str]]:
    """`SECURE_CSP` for the admin and the docs pages (the templates directory holds the Scalar page)."""
    return {
        "default-src": [CSP.SELF],
        "script-src": [CSP.SELF, CSP.NONCE, *inline_script_hashes(template=templates / "reference" / "scalar.html")],
        "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
        "img-src": [CSP.SELF, "data:"],
        "font-src": [CSP.SELF, "data:"],
        "connect-src": [CSP.SELF],
        "object-src": [CSP.NONE],
        "base-uri": [CSP.SELF],
        "form-action": [CSP.SELF],
        "frame-ancestors": [CSP.NONE],
    }
