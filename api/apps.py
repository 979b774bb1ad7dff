from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The HTTP API: the wire formats, their views and documents, and the commands that serve them.
    Last in INSTALLED_APPS: its admin module gives every registered model admin the input check."""

    name = "api"
    verbose_name = "API"

    def ready(self) -> None:
        """Install the wire formats the settings list for the shared plumbing (`api.plumbing.formats`), create
        their metric series, and connect the cache-clearing signal receivers."""
        from django.conf import settings
        from django.utils.module_loading import import_string

        from api.batches.urls import batch_routes_shape_install
        from api.classify import signals  # noqa: F401
        from api.plumbing.formats import wire_formats, wire_formats_install
        from api.plumbing.metering import STREAM_API, meters_prepare

        wire_formats_install(
            formats=[import_string(f"{package}.format.FORMAT") for package in settings.API_WIRE_FORMATS]
        )
        meters_prepare(apis=[*(f.name for f in wire_formats()), STREAM_API])
        batch_routes_shape_install()
