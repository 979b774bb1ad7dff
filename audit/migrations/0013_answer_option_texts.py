"""Answers keep their question's option texts and instructions as the model read them (level `full`), so the audit
shows them whichever wire format asked, without reading any format's JSON again."""
# ruff: noqa: RUF012, E501

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0012_evaluation_api_google"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationanswer",
            name="instructions",
            field=models.TextField(
                blank=True, default="", help_text="The question's instructions as the model read them (level `full`)."
            ),
        ),
        migrations.AddField(
            model_name="evaluationanswer",
            name="option_texts",
            field=models.JSONField(
                blank=True,
                help_text="Each option as the model read it, in the order of the option keys (level `full` keeps it): what the audit shows, whichever wire format asked.",
                null=True,
            ),
        ),
    ]
