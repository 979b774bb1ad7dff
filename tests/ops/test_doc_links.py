"""Every relative link of the project's own Markdown pages (the README, the changelog, docs/ and the rest; not the
vendored assets' notes) leads somewhere: to a file of the checkout and, with a `#fragment`, to a heading of that page
under the anchor GitHub gives it. A section moved from one page to another breaks no link silently.

Links are read with a CommonMark parser (markdown-it-py), so text that only looks like a link (in a code span or
block) is not one, and reference-style links and images count as well as inline ones.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

from serving.config import BASE_DIR

VENDORED = (BASE_DIR / "static" / "vendor",)
"""Notes that came with vendored files: their links are their authors'."""
MARKDOWN = MarkdownIt("commonmark").enable("table")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
"""A link with a scheme (https:, mailto:) points outside the checkout; it is not checked here."""


def pages() -> list[Path]:
    """The project's Markdown pages: every `.md` file of the checkout outside hidden and vendored folders."""
    found = []
    for folder, children, files in os.walk(BASE_DIR):
        children[:] = [c for c in children if not c.startswith(".") and Path(folder, c) not in VENDORED]
        found += [Path(folder, name) for name in files if name.endswith(".md")]
    return sorted(found)


def _inline_tokens(text: str) -> Iterator[Token]:
    for token in MARKDOWN.parse(text):
        if token.type == "inline" and token.children:
            yield token
            yield from token.children


def links(text: str) -> list[str]:
    """The targets of the page's links and images, in order."""
    targets = []
    for token in _inline_tokens(text):
        if token.type == "link_open":
            targets.append(str(token.attrs["href"]))
        elif token.type == "image":
            targets.append(str(token.attrs["src"]))
    return targets


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings; a repeated heading's get `-1`, `-2`, ... as GitHub numbers them."""
    tokens = MARKDOWN.parse(text)
    found: set[str] = set()
    seen: dict[str, int] = {}
    for opening, inline in pairwise(tokens):
        if opening.type != "heading_open":
            continue
        words = "".join(c.content for c in inline.children or [] if c.type in ("text", "code_inline"))
        anchor = anchor_of(words)
        repeats = seen.get(anchor, 0)
        seen[anchor] = repeats + 1
        found.add(anchor if repeats == 0 else f"{anchor}-{repeats}")
    return found


def broken_links(page: Path, text: str) -> list[str]:
    """Each relative link of `page` (whose content is `text`) that leads to no file, or to no heading of it."""
    broken = []
    for target in links(text):
        if EXTERNAL.match(target):
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if path and not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md":
            headings = anchors(text if resolved == page else resolved.read_text(encoding="utf-8"))
            if fragment not in headings:
                broken.append(f"{target}: {resolved.name} has no heading with the anchor #{fragment}")
    return broken


def test_every_relative_link_of_the_docs_leads_to_a_file_and_heading_of_the_checkout() -> None:
    checked = pages()
    assert {BASE_DIR / "README.md", BASE_DIR / "docs" / "README.md"} <= set(checked)
    problems = [
        f"{page.relative_to(BASE_DIR)}: {problem}"
        for page in checked
        for problem in broken_links(page, page.read_text(encoding="utf-8"))
    ]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_a_link_to_a_missing_page_or_heading_is_reported_and_code_is_not_a_link(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## `OPENJEV_X`: what it means\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    text = (
        "# Page\n\n[fine](other.md#openjev_x-what-it-means) [second](other.md#twice-1) [self](#page)\n"
        "[gone](missing.md) [no heading](other.md#nowhere) ![picture](picture.png) [out](https://example.com/x)\n\n"
        "`[code](nowhere.md)`\n\n```\n[block](nowhere.md)\n```\n\n[ref][r]\n\n[r]: other.md#twice-2\n"
    )
    assert broken_links(page, text) == [
        "missing.md: no such file",
        "other.md#nowhere: other.md has no heading with the anchor #nowhere",
        "picture.png: no such file",
        "other.md#twice-2: other.md has no heading with the anchor #twice-2",
    ]
