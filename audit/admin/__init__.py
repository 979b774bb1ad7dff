"""The operator's view: a read-only evaluation audit with its dashboard (`evaluations`, `dashboard`),
issuing and revoking API keys with their limits (`apikeys`) and usage per day (`usage`); `display` holds
the HTML pieces the admins of every app share, `checked` the input check `api.admin` gives them all.
Classifiers are administered by `api.classify.admin`, calibrations by `calibration.admin`. Importing the
modules registers them."""

from audit.admin import apikeys, evaluations, usage

__all__ = ["apikeys", "evaluations", "usage"]
