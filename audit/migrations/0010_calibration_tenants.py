"""Which API keys a calibration was fitted from, and the keys it applies to (none: every caller)."""
# ruff: noqa: RUF012, E501

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0009_key_usage"),
    ]

    operations = [
        migrations.AddField(
            model_name="calibration",
            name="applies_to",
            field=models.JSONField(
                blank=True,
                help_text='The API keys whose answers it changes, e.g. ["oj_ab12cd34"] ("" for calls without a key); empty: every caller\'s. Labels from one tenant should calibrate that tenant alone.',
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="calibration",
            name="label_keys",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Which API keys' labels it was fitted on, and how many each ('' : no key).",
                verbose_name="labels by API key",
            ),
        ),
    ]
