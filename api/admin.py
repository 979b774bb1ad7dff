"""The API's admin pages (classifiers and their try-it form), then the input check for every model
admin of the site: this app is the last in INSTALLED_APPS, so the others' admins are registered by now."""

from django.contrib import admin

from api.classify import admin as classify_admin
from audit.admin.checked import site_input_checked

site_input_checked(site=admin.site)

__all__ = ["classify_admin"]
