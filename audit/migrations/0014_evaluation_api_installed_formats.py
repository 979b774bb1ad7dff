"""`Evaluation.api`'s choices are the installed wire formats (`audit.apis.api_choices`, a callable): this is the
last migration a format needs; one added to the settings changes no model state."""
# ruff: noqa: RUF012

from django.db import migrations, models

import audit.apis


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0013_answer_option_texts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="evaluation",
            name="api",
            field=models.CharField(
                choices=audit.apis.api_choices,
                default="systemone",
                help_text="The wire format the call came through.",
                max_length=16,
                verbose_name="API",
            ),
        ),
    ]
