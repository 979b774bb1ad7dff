"""URLs. No trailing-slash redirects anywhere on the API: a POST must never be redirected."""

from importlib import import_module

from django.conf import settings
from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from django.utils.module_loading import module_has_submodule

from api import feedback, metrics, model_views, status_views
from api.openapi import pages
from api.plumbing import assets

handler400 = "api.plumbing.error_responses.bad_request_view"
handler403 = "api.plumbing.error_responses.permission_denied_view"
handler404 = "api.plumbing.error_responses.not_found_view"
handler500 = "api.plumbing.error_responses.server_error_view"


def _format_routes(package: str) -> list[URLPattern | URLResolver]:
    """A wire format's own routes: its `urls` module's, none for a format that shares another's path (its
    bodies are answered by the view of the path's primary format)."""
    if not module_has_submodule(import_module(package), "urls"):
        return []
    return list(import_module(f"{package}.urls").urlpatterns)


urlpatterns = [
    # Each wire format's own routes (settings.API_WIRE_FORMATS), then the routes every format shares.
    *(route for package in settings.API_WIRE_FORMATS for route in _format_routes(package)),
    path("", include("api.batches.urls")),
    path("v1/feedback", feedback.FeedbackView.as_view(), name="feedback"),
    path("v1/models", model_views.ModelsView.as_view(), name="models"),
    path("v1/models/<path:model_id>", model_views.ModelView.as_view(), name="model"),
    path("v1/limits", status_views.LimitsView.as_view(), name="limits"),
    path("health", status_views.HealthView.as_view(), name="health"),
    path("health/live", status_views.LiveView.as_view(), name="health-live"),
    path("metrics", metrics.MetricsView.as_view(), name="metrics"),
    path("admin/", admin.site.urls),
    path("openapi.json", pages.openapi_view, name="openapi-json"),
    path("docs", pages.SwaggerView.as_view(), name="swagger-ui"),
    path("static/<path:path>", assets.asset_view, name="static-asset"),
    path("", pages.reference_view, name="reference"),
]
