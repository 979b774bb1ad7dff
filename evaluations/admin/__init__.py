"""The operator's view: a read-only evaluation audit with its dashboard (`evaluations`, `dashboard`),
issuing and revoking API keys with their limits (`apikeys`) and usage per day (`usage`), and the
classifiers served by `POST /v1/classify`
(`classifiers`), calibrations, dataset runs and answer labels (`calibrations`); `display` holds the
HTML pieces they share. Importing the modules registers them; then every model admin of the site, the
installed apps' too (this app is the last in INSTALLED_APPS), gets the input check of `checked`."""

from django.contrib import admin

from evaluations.admin import apikeys, calibrations, classifiers, evaluations, usage
from evaluations.admin.checked import site_input_checked

site_input_checked(site=admin.site)

__all__ = ["apikeys", "calibrations", "classifiers", "evaluations", "usage"]
