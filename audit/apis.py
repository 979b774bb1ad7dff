"""The wire formats a stored call may have come through (`Evaluation.api`'s choices).

The API installs its formats at start (`api.plumbing.formats.wire_formats_install`) and tells them here; the field
reads them through a callable, so a format added to the settings needs no migration. No Django model here: the
API's plumbing imports this before any model is loaded.
"""

from __future__ import annotations

_api_choices: list[tuple[str, str]] = []


def api_choices() -> list[tuple[str, str]]:
    """The wire formats a call may come through (`Evaluation.api`): the installed ones, each one's name and label,
    as the API installs them (`api.plumbing.formats`). A callable, so a format added to the settings needs no
    migration."""
    return list(_api_choices)


def api_choices_install(*, choices: list[tuple[str, str]]) -> None:
    _api_choices[:] = choices
