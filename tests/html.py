"""Reading values out of rendered pages."""

from __future__ import annotations

import re


def matched(pattern: str, text: str) -> str:
    """The first group of `pattern`'s first match in `text`; no match fails the test."""
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} is not on the page"
    return found.group(1)
