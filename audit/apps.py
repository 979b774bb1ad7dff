from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The stored record: evaluations and their answers, API keys, usage, and the models the other
    apps keep (classifiers, calibrations, dataset runs). Its label stays `evaluations`, the app's name
    before the split, so existing databases keep their tables, migrations and admin URLs unchanged."""

    name = "audit"
    label = "evaluations"
    verbose_name = "Evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Connect the cache-clearing signal receivers."""
        from audit import signals  # noqa: F401
