from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "evaluations"
    verbose_name = "Evaluations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Connect the cache-clearing signal receivers."""
        from evaluations import signals  # noqa: F401
