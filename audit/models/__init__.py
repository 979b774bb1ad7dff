"""What the service remembers: issued API keys and one row per evaluation, with one row per answer, and the
classifiers, calibrations and usage around them. One module per concern; every model is named here, as
Django and the migrations (`audit.models.JSONTextField`) expect."""

from audit.models.calibrations import Calibration
from audit.models.classifiers import (
    CLASSIFIER_NAME_VALIDATOR,
    CLASSIFIER_TYPE_CHOICES,
    Classifier,
    ClassifierLabel,
    DatasetRun,
)
from audit.models.evaluations import Evaluation, EvaluationAnswer
from audit.models.fields import QUESTION_TYPE_CHOICES, STATUS_CHOICES, STORE_LEVEL_CHOICES, JSONTextField
from audit.models.keys import ApiKey, KeyUsage

__all__ = [
    "CLASSIFIER_NAME_VALIDATOR",
    "CLASSIFIER_TYPE_CHOICES",
    "QUESTION_TYPE_CHOICES",
    "STATUS_CHOICES",
    "STORE_LEVEL_CHOICES",
    "ApiKey",
    "Calibration",
    "Classifier",
    "ClassifierLabel",
    "DatasetRun",
    "Evaluation",
    "EvaluationAnswer",
    "JSONTextField",
    "KeyUsage",
]
