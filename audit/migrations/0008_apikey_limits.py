"""Per-key limits set in the admin (blank: the deployment's defaults)."""
# ruff: noqa: RUF012

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0007_evaluation_api_and_refusals"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="concurrency",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Evaluations in flight at once; blank: OPENJEV_KEY_CONCURRENCY (unset: unlimited).",
                null=True,
                verbose_name="concurrent evaluations",
            ),
        ),
        migrations.AddField(
            model_name="apikey",
            name="requests_per_minute",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Evaluating requests per minute; blank: OPENJEV_KEY_REQUESTS_PER_MINUTE (unset: unlimited).",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="apikey",
            name="tokens_per_minute",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Input tokens per minute; blank: OPENJEV_KEY_TOKENS_PER_MINUTE (unset: unlimited).",
                null=True,
            ),
        ),
    ]
