"""Google's Decisions shape (`POST /v1/decisions` with a map of questions) is stored as its own API."""
# ruff: noqa: RUF012

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0011_apikey_limits_zero_pauses"),
    ]

    operations = [
        migrations.AlterField(
            model_name="evaluation",
            name="api",
            field=models.CharField(
                choices=[
                    ("systemone", "System One (POST /v1/systemone and its stream)"),
                    ("decisions", "Decisions (POST /v1/decisions)"),
                    ("google", "Google's Decisions shape (POST /v1/decisions)"),
                    ("classify", "Classify (POST /v1/classify)"),
                ],
                default="systemone",
                help_text="The wire format the call came through.",
                max_length=16,
                verbose_name="API",
            ),
        ),
    ]
