"""Usage per API key per day, counted by the storage writer."""
# ruff: noqa: RUF012

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0008_apikey_limits"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeyUsage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "key_label",
                    models.CharField(
                        help_text="oj_<prefix>, 'env', 'admin', or empty when auth is off.",
                        max_length=32,
                        verbose_name="API key",
                    ),
                ),
                ("day", models.DateField()),
                ("evaluations", models.PositiveIntegerField(default=0)),
                ("questions", models.PositiveBigIntegerField(default=0)),
                ("input_tokens", models.PositiveBigIntegerField(default=0)),
                ("cached_tokens", models.PositiveBigIntegerField(default=0)),
            ],
            options={
                "verbose_name": "key usage (per day)",
                "verbose_name_plural": "key usage (per day)",
                "ordering": ("-day", "key_label"),
                "constraints": [models.UniqueConstraint(fields=("key_label", "day"), name="key_usage_per_day")],
            },
        ),
    ]
