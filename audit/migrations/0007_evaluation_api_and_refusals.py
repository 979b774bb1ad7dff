"""Which API a call came through, the Decisions API's end-user id and cache key, and refused answers.
Existing rows get `systemone`, or `classify` where they name a classifier."""
# ruff: noqa: RUF012, E501

from typing import Any

from django.db import migrations, models


def classify_calls_marked(apps: Any, schema_editor: Any) -> None:
    """Rows stored before the API was recorded: a call with a classifier came through POST /v1/classify."""
    Evaluation = apps.get_model("evaluations", "Evaluation")
    Evaluation.objects.exclude(classifier_name="").update(api="classify")


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0006_answer_indexes_lean"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluation",
            name="api",
            field=models.CharField(
                choices=[
                    ("systemone", "System One (POST /v1/systemone and its stream)"),
                    ("decisions", "Decisions (POST /v1/decisions)"),
                    ("classify", "Classify (POST /v1/classify)"),
                ],
                default="systemone",
                help_text="The wire format the call came through.",
                max_length=16,
                verbose_name="API",
            ),
        ),
        migrations.AddField(
            model_name="evaluation",
            name="prompt_cache_key",
            field=models.CharField(
                blank=True,
                help_text="POST /v1/decisions `prompt_cache_key`, as sent (the backend's prefix cache needs no hint).",
                max_length=256,
            ),
        ),
        migrations.AddField(
            model_name="evaluation",
            name="safety_identifier",
            field=models.CharField(
                blank=True,
                help_text="The caller's own id of its end user (POST /v1/decisions `safety_identifier`), as sent; never an authenticated identity.",
                max_length=64,
            ),
        ),
        migrations.AddField(
            model_name="evaluationanswer",
            name="refused",
            field=models.BooleanField(
                default=False,
                help_text="Answered as a refusal (POST /v1/decisions): the label mass was under OPENJEV_REFUSAL_LABEL_MASS. The numbers above are kept as the model gave them.",
            ),
        ),
        migrations.AlterField(
            model_name="evaluation",
            name="status_code",
            field=models.PositiveSmallIntegerField(
                choices=[
                    (200, "200 OK"),
                    (400, "400 invalid request (classify, decisions)"),
                    (404, "404 unknown classifier or model (classify, decisions)"),
                    (422, "422 invalid request"),
                    (499, "499 client closed request"),
                    (500, "500 internal error"),
                    (502, "502 backend error"),
                    (503, "503 backend unavailable"),
                    (504, "504 timeout"),
                    (529, "529 overloaded"),
                ],
                db_index=True,
                verbose_name="status",
            ),
        ),
        migrations.RunPython(classify_calls_marked, migrations.RunPython.noop),
    ]
