"""The operator's view: a read-only evaluation audit with its dashboard (`evaluations`, `dashboard`),
issuing and revoking API keys (`apikeys`), and the classifiers served by `POST /v1/classify`
(`classifiers`); `display` holds the HTML pieces they share. Importing the modules registers them."""

from evaluations.admin import apikeys, classifiers, evaluations

__all__ = ["apikeys", "classifiers", "evaluations"]
