"""Answer-table indexes matched to the queries made: every index costs on each of up to 64 inserts per
evaluation. Kept: (question_id, type); partial: labelled answers by question key (calibration fits) and
calibrated answers (a calibration deleted). Dropped: (type, confidence) and label_mass (no query uses them),
and evaluation_id alone (the (evaluation, position) constraint's index starts with it)."""
# ruff: noqa: RUF012

import django.db.models.deletion
from django.db import migrations, models

_TABLE = '"evaluations_evaluationanswer"'
DROPPED = (
    "evaluations_evaluationanswer_evaluation_id_e69cdf5c",
    "evaluations_evaluationanswer_question_key_305fce2c",
    "evaluations_evaluationanswer_question_key_305fce2c_like",  # PostgreSQL's LIKE index of a CharField
    "evaluations_evaluationanswer_calibration_id_36b9fc64",
)
RECREATED = (
    f'CREATE INDEX "evaluations_evaluationanswer_evaluation_id_e69cdf5c" ON {_TABLE} ("evaluation_id")',
    f'CREATE INDEX "evaluations_evaluationanswer_question_key_305fce2c" ON {_TABLE} ("question_key")',
    f'CREATE INDEX "evaluations_evaluationanswer_calibration_id_36b9fc64" ON {_TABLE} ("calibration_id")',
)


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0005_calibration"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="evaluationanswer",
            name="answer_type_confidence",
        ),
        migrations.RemoveIndex(
            model_name="evaluationanswer",
            name="answer_label_mass",
        ),
        # The indexes the three fields had are dropped by name: letting Django alter the fields would
        # rebuild the whole answer table on SQLite, once per field.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="evaluationanswer",
                    name="calibration",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DB_SET_NULL,
                        related_name="answers",
                        to="evaluations.calibration",
                    ),
                ),
                migrations.AlterField(
                    model_name="evaluationanswer",
                    name="evaluation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="answers",
                        to="evaluations.evaluation",
                    ),
                ),
                migrations.AlterField(
                    model_name="evaluationanswer",
                    name="question_key",
                    field=models.CharField(
                        blank=True,
                        help_text="The question's identity for calibration (type, instructions, options).",
                        max_length=32,
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=[f'DROP INDEX IF EXISTS "{name}"' for name in DROPPED],
                    reverse_sql=RECREATED,
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="evaluationanswer",
            index=models.Index(
                condition=models.Q(("label__isnull", False)), fields=["question_key"], name="answer_labelled_key"
            ),
        ),
        migrations.AddIndex(
            model_name="evaluationanswer",
            index=models.Index(
                condition=models.Q(("calibration__isnull", False)), fields=["calibration"], name="answer_calibrated"
            ),
        ),
    ]
