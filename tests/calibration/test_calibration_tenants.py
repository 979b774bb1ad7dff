"""Calibrations across tenants: a calibration records which API keys' labels it was fitted on, serves only those
keys unless told otherwise (`--apply-to`, `--apply-to-all`), `calibrate` fits from chosen keys only, and a
calibration limited to some keys changes only their answers."""

from __future__ import annotations

import uuid
from dataclasses import replace

import httpx
import pytest
from django.core.management import CommandError

from audit.keys import IssuedKey, apikey_issue
from audit.models import EvaluationAnswer
from calibration.applied import calibration_cache_forget
from tests.calibration.test_calibration import KEYS, calibrate, team_request
from tests.database import db
from tests.stored import drained

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


async def labelled_by(api: httpx.AsyncClient, key: IssuedKey, *, n: int) -> str:
    """`n` labelled 'team' answers made with `key` (a third of them labelled against the served choice)."""
    headers = {"Authorization": f"Bearer {key.secret}"}
    for i in range(n):
        assert (await api.post("/v1/systemone", json=team_request(i), headers=headers)).status_code == 200
    await drained()

    def label() -> str:
        answers = EvaluationAnswer.objects.filter(question_id="team", evaluation__api_key_label=key.label)
        for i, answer in enumerate(answers.order_by("id")):
            chosen = KEYS.index(answer.choice)
            answer.label = KEYS[chosen if i % 3 else (chosen + 1) % len(KEYS)]
            answer.save(update_fields=["label"])
        return str(answers.first().question_key)  # type: ignore[union-attr]

    return await db(label)


async def test_a_tenants_calibration_is_fitted_on_its_labels_and_changes_only_its_answers(api, fake, store, settings):
    settings.OPENJEV = replace(settings.OPENJEV, require_api_key=True, calibration=True)
    tenant = await db(lambda: apikey_issue(name=f"tenant-{uuid.uuid4().hex[:6]}"))
    other = await db(lambda: apikey_issue(name=f"other-{uuid.uuid4().hex[:6]}"))
    key = await labelled_by(api, tenant, n=12)
    await labelled_by(api, other, n=3)

    fitted = await db(
        lambda: calibrate(
            "--question-key",
            key,
            "--keys",
            tenant.label,
            "--apply-to",
            tenant.label,
            "--min-labels",
            "10",
            "--activate",
        )
    )
    assert fitted["label_keys"] == {tenant.label: 12} and fitted["applies_to"] == [tenant.label]
    both = await db(lambda: calibrate("--question-key", key, "--min-labels", "10"))
    assert both["label_keys"] == {tenant.label: 12, other.label: 3}
    assert both["applies_to"] == sorted([tenant.label, other.label])  # by default, the keys that gave labels
    everyone = await db(lambda: calibrate("--question-key", key, "--min-labels", "10", "--apply-to-all"))
    assert everyone["applies_to"] is None
    with pytest.raises(CommandError, match="has 3 labelled answer"):
        await db(lambda: calibrate("--question-key", key, "--keys", other.label, "--min-labels", "10"))

    calibration_cache_forget()
    mine = await api.post("/v1/systemone", json=team_request(1), headers={"Authorization": f"Bearer {tenant.secret}"})
    theirs = await api.post("/v1/systemone", json=team_request(1), headers={"Authorization": f"Bearer {other.secret}"})
    assert mine.headers.get("x-openjev-calibrated") == "team"
    assert "x-openjev-calibrated" not in theirs.headers
    assert mine.json()["answers"]["team"]["probabilities"] != theirs.json()["answers"]["team"]["probabilities"]
