"""A key limit of 0 pauses the key (blank still takes the default): the help texts say so."""
# ruff: noqa: RUF012, E501

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0010_calibration_tenants"),
    ]

    operations = [
        migrations.AlterField(
            model_name="apikey",
            name="concurrency",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Evaluations in flight at once; 0 pauses the key; blank: OPENJEV_KEY_CONCURRENCY (unset: unlimited).",
                null=True,
                verbose_name="concurrent evaluations",
            ),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="requests_per_minute",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Requests per minute; 0 pauses the key; blank: OPENJEV_KEY_REQUESTS_PER_MINUTE (unset: unlimited).",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="apikey",
            name="tokens_per_minute",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Input tokens per minute; 0 pauses the key; blank: OPENJEV_KEY_TOKENS_PER_MINUTE (unset: unlimited).",
                null=True,
            ),
        ),
    ]
