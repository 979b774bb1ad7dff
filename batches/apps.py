from django.apps import AppConfig


class BatchesConfig(AppConfig):
    """Batch jobs: uploaded input files, batches, one item per line and what each line was answered."""

    name = "batches"
    verbose_name = "Batch jobs"
    default_auto_field = "django.db.models.BigAutoField"
