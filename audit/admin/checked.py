"""Bad input to the admin is answered 400, never 500: a malformed id posted with an action
(`_selected_action=not-a-number`) reached `queryset.filter(pk__in=...)`, whose ValueError escaped as a 500.

The ids are checked against the model's primary key before Django's action handling runs, so an error
raised inside an action itself (a bug) is still a 500 with its traceback, not hidden as bad input. Every
model admin of the site gets the check, the installed apps' (auth's users and groups, axes' records)
included: `site_input_checked` re-registers them once the app's own admins are registered.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import ActionLocation
from django.core.exceptions import BadRequest, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from serving.compat import admin_registered


def selected_ids_check(*, request: HttpRequest, model_admin: admin.ModelAdmin) -> None:
    """Every id posted for an action must be a value of the model's primary key (else BadRequest: 400)."""
    pk = model_admin.model._meta.pk
    assert pk is not None
    for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
        try:
            if "\x00" in value:  # no key holds one, and PostgreSQL cannot even compare a text with one
                raise ValidationError("a NUL character")
            pk.run_validators(pk.to_python(value))  # a text id's length, a number's range
        except ValidationError:
            raise BadRequest(
                f"{ACTION_CHECKBOX_NAME}: {value[:40]!r} is not an id of {model_admin.model._meta.verbose_name}"
            ) from None


class InputChecked(admin.ModelAdmin):
    """A model admin whose actions refuse malformed ids with a 400."""

    def response_action(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any],
        action_location: ActionLocation = ActionLocation.CHANGE_LIST,
    ) -> HttpResponse | None:
        selected_ids_check(request=request, model_admin=self)
        return super().response_action(request, queryset, action_location=action_location)


def site_input_checked(*, site: admin.AdminSite) -> None:
    """Give every model admin registered on `site` the input check (a subclass with `InputChecked` first)."""
    for model, model_admin in admin_registered(site=site):
        admin_class = type(model_admin)
        if not isinstance(model_admin, InputChecked):
            site.unregister(model)
            site.register(
                model, type(admin_class.__name__, (InputChecked, admin_class), {"__module__": admin_class.__module__})
            )
