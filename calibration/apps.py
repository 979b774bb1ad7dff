from django.apps import AppConfig


class CalibrationConfig(AppConfig):
    """Calibrations fitted from labelled answers and applied to served ones (their model,
    `Calibration`, is stored by the audit app)."""

    name = "calibration"
    verbose_name = "Calibration"

    def ready(self) -> None:
        """Connect the cache-clearing signal receivers."""
        from calibration import signals  # noqa: F401
