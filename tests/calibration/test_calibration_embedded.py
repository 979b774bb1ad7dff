"""Labelled evaluation and calibration end to end on the embedded engine (the bundled Qwen2.5-Coder-0.5B,
the plumbing model): a small labelled dataset run, a fit from its stored answers, and the fit applied
to the next request."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from django.core.management import call_command

from audit.models import EvaluationAnswer
from calibration.applied import calibration_cache_forget
from inference.backends.llamacpp import LlamaCppBackend
from inference.scoring import probabilities_served
from inference.vector_scaling import Calibrator, probabilities_calibrate
from tests.database import db
from tests.embedded import SMALL, api_on, bundled_backend
from tests.stored import drained

pytestmark = [pytest.mark.embedded, pytest.mark.django_db(transaction=True)]

QUESTION = {"type": "noul", "instructions": "Is this product review positive?"}
REVIEWS = [
    ("Absolutely love it, works perfectly and arrived early.", True),
    ("Terrible quality, it broke after one day.", False),
    ("Best purchase I made this year, highly recommend!", True),
    ("Waste of money. Do not buy.", False),
    ("Great value and the battery lasts forever.", True),
    ("It stopped working and support never answered.", False),
    ("Five stars, my kids adore it.", True),
    ("Cheap plastic, smells awful, returned it.", False),
    ("Exceeded my expectations in every way.", True),
    ("The worst customer service I have ever had.", False),
    ("Comfortable, stylish and well made.", True),
    ("Arrived broken and the refund took a month.", False),
    ("Simple to set up and it just works.", True),
    ("Disappointing: nothing like the pictures.", False),
]


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaCppBackend]:
    with bundled_backend(source=SMALL, n_ctx=8192, threads=1) as backend:
        yield backend


@pytest.fixture
async def embedded(llama: LlamaCppBackend, store: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with api_on(backend=llama) as client:
        yield client


def command_json(name: str, *args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command(name, *args, "--json", stdout=out)
    return dict(json.loads(out.getvalue()))


async def test_a_labelled_run_on_the_embedded_model_is_measured_fitted_and_then_served_calibrated(embedded, tmp_path):
    path = tmp_path / "reviews.jsonl"
    path.write_text(
        "".join(json.dumps({"state": text, "question": QUESTION, "label": label}) + "\n" for text, label in REVIEWS)
    )
    report = await db(lambda: command_json("evaluate_dataset", str(path), "--concurrency", "2"))

    assert report["n"] == len(REVIEWS) and report["failed"] == 0
    assert report["accuracy"] >= 0.7  # plainly worded reviews: even the 0.5B model gets most right
    assert 0 <= report["ece"] <= 1 and 0 <= report["brier"] <= 2 and report["label_mass"] > 0.5
    assert sum(map(sum, report["questions"][0]["confusion"])) == len(REVIEWS)
    key = report["questions"][0]["question_key"]

    fitted = await db(lambda: command_json("calibrate", "--question-key", key, "--activate", "--min-labels", "12"))
    assert fitted["active"] and fitted["report"]["n"] == len(REVIEWS) and fitted["report"]["n_held_out"] == 4
    calibration_cache_forget()

    response = await embedded.post(
        "/v1/systemone",
        json={"model": "jev-latest", "questions": {"q": QUESTION}, "state": "Lovely colours and very sturdy."},
    )
    await drained()
    rid = response.headers["x-typesafe-request-id"]
    stored = await db(lambda: EvaluationAnswer.objects.get(evaluation__request_id=rid))

    assert response.status_code == 200 and response.headers["x-openjev-calibrated"] == "q"
    assert stored.uncalibrated_probabilities is not None and stored.calibration_id == fitted["id"]
    expected = probabilities_served(
        probabilities_calibrate(
            probabilities=[stored.uncalibrated_probabilities[k] for k in ("true", "false")],
            calibrator=Calibrator(temperature=fitted["temperature"]),
        )
    )
    assert response.json()["answers"]["q"]["noul"] == expected[0]  # served in millionths
