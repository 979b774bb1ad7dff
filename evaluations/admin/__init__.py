"""The operator's view: a read-only evaluation audit with its dashboard (`evaluations`, `dashboard`),
issuing and revoking API keys (`apikeys`), and the classifiers served by `POST /v1/classify`
(`classifiers`), calibrations, dataset runs and answer labels (`calibrations`); `display` holds the
HTML pieces they share. Importing the modules registers them."""

from evaluations.admin import apikeys, calibrations, classifiers, evaluations

__all__ = ["apikeys", "calibrations", "classifiers", "evaluations"]
