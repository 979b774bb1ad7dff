"""What a wire format declares on its descriptor reaches the shared parts without touching them: its name and label
are `Evaluation.api`'s choices with no migration, its key header is read as the API key on any route."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from io import StringIO

import pytest
from django.core.management import call_command

from api.plumbing.formats import WireFormat, bare_key_of, wire_formats, wire_formats_install
from audit.apis import api_choices
from audit.models import Evaluation


@pytest.fixture
def new_format() -> Iterator[WireFormat]:
    """A format installed beside today's, as a settings line would (then the installed ones again)."""
    installed = wire_formats()
    added = replace(installed[0], name="newformat", label="A new format", path="/v1/new", key_header="x-new-key")
    wire_formats_install(formats=[*installed, added])
    yield added
    wire_formats_install(formats=installed)


@pytest.mark.django_db
def test_a_new_format_is_a_stored_api_choice_and_needs_no_migration(new_format: WireFormat) -> None:
    assert ("newformat", "A new format") in api_choices()
    Evaluation._meta.get_field("api").clean("newformat", None)  # a valid choice, or it raises
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)  # exits non-zero on a change
    assert "No changes detected" in out.getvalue()


def test_a_formats_key_header_carries_the_api_key(new_format: WireFormat) -> None:
    headers = {"x-new-key": "oj_from_the_new_header"}
    assert bare_key_of(header=headers.get) == "oj_from_the_new_header"
    none: dict[str, str] = {}
    assert bare_key_of(header=none.get) is None
