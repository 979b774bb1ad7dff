from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The HTTP API: the wire formats, their views and documents, and the commands that serve them.
    Last in INSTALLED_APPS: its admin module gives every registered model admin the input check."""

    name = "api"
    verbose_name = "API"

    def ready(self) -> None:
        """Connect the cache-clearing signal receivers."""
        from api.classify import signals  # noqa: F401
