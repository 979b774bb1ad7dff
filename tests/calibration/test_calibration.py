"""Calibrations fitted from labelled stored answers (fake SGLang) and applied at serving time."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from typing import Any

import httpx
import pytest
from django.core.management import CommandError, call_command
from websockets.asyncio.client import connect

from audit.models import Calibration, Classifier, ClassifierLabel, EvaluationAnswer
from calibration.applied import calibration_cache_forget
from inference.metrics import Scored
from inference.scoring import probabilities_served
from inference.vector_scaling import Calibrator, calibration_fit, probabilities_calibrate
from tests.conftest import README_REQUEST
from tests.database import db
from tests.stored import drained
from tests.stream.conftest import of, send, until_ended

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TEAM = README_REQUEST["questions"]["team"]
KEYS = list(TEAM["criteria"])


def team_request(i: int) -> dict[str, Any]:
    return {
        "model": "jev-latest",
        "state": f"Ticket {i}: {'refund please ' * (i % 5)}the app crashed {i % 3} times",
        "questions": {"team": TEAM},
    }


async def labelled_traffic(api: httpx.AsyncClient, *, n: int) -> str:
    """`n` answered requests whose 'team' answers are labelled: the served choice for 2 in 3, the
    next option otherwise (an overconfident model). Returns the answers' question key."""
    for i in range(n):
        assert (await api.post("/v1/systemone", json=team_request(i))).status_code == 200
    await drained()

    def label_all() -> str:
        for i, answer in enumerate(EvaluationAnswer.objects.filter(question_id="team").order_by("id")):
            chosen = KEYS.index(answer.choice)
            answer.label = KEYS[chosen if i % 3 else (chosen + 1) % len(KEYS)]
            answer.save(update_fields=["label"])
        return str(EvaluationAnswer.objects.filter(question_id="team").first().question_key)  # type: ignore[union-attr]

    return await db(label_all)


def calibrate(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("calibrate", *args, "--json", stdout=out)
    return dict(json.loads(out.getvalue()))


async def test_a_fit_below_the_minimum_is_refused_saying_how_many_labels_exist_and_are_needed(api, fake, store):
    key = await labelled_traffic(api, n=12)

    with pytest.raises(CommandError, match=r"has 12 labelled answer\(s\); a fit needs at least 50"):
        await db(lambda: calibrate("--question-key", key))
    assert await db(Calibration.objects.count) == 0


async def test_an_activated_fit_calibrates_served_and_stored_answers_and_names_them_in_a_header(
    api, fake, store, settings
):
    key = await labelled_traffic(api, n=40)
    fitted = await db(lambda: calibrate("--question-key", key, "--vector", "--activate", "--min-labels", "30"))
    report = fitted["report"]
    assert fitted["active"] and fitted["method"] == "vector" and len(fitted["biases"]) == 3
    assert (report["n"], report["n_fit"], report["n_held_out"]) == (40, 28, 12)
    assert report["after"]["log_loss"] < report["before"]["log_loss"]  # a third of the labels contradict the model
    calibration_cache_forget()

    body = {**team_request(1), "questions": {"team": TEAM, "refund": README_REQUEST["questions"]["refund"]}}
    response = await api.post("/v1/systemone", json=body)
    await drained()
    rid = response.headers["x-typesafe-request-id"]
    stored = await db(lambda: EvaluationAnswer.objects.get(evaluation__request_id=rid, question_id="team"))

    assert response.headers["x-openjev-calibrated"] == "team"
    assert stored.uncalibrated_probabilities is not None
    calibrator = Calibrator(temperature=fitted["temperature"], biases=tuple(fitted["biases"]))
    expected = probabilities_served(
        probabilities_calibrate(
            probabilities=[stored.uncalibrated_probabilities[k] for k in KEYS], calibrator=calibrator
        )
    )
    served = response.json()["answers"]["team"]["probabilities"]
    assert [served[k] for k in KEYS] == list(expected)  # the calibrated probabilities, served in millionths
    assert stored.probabilities == served and stored.calibration_id == fitted["id"]
    assert stored.raw_probabilities is not None
    refund = await db(lambda: EvaluationAnswer.objects.get(evaluation__request_id=rid, question_id="refund"))
    assert refund.calibration_id is None and refund.uncalibrated_probabilities is None

    settings.OPENJEV = replace(settings.OPENJEV, calibration=False)
    off = await api.post("/v1/systemone", json=body)
    assert "x-openjev-calibrated" not in off.headers
    assert off.json()["answers"]["team"]["probabilities"] == stored.uncalibrated_probabilities


async def test_refitting_uses_the_answers_as_they_were_before_calibration(api, fake, store):
    key = await labelled_traffic(api, n=30)
    first = await db(lambda: calibrate("--question-key", key, "--activate", "--min-labels", "30"))
    assert first["temperature"] > 1.5  # a third of the labels contradict the model: it is overconfident
    calibration_cache_forget()
    for i in range(30):  # the same traffic again, now served calibrated
        await api.post("/v1/systemone", json=team_request(i))
    await drained()

    def label_like_before() -> None:
        answers = list(EvaluationAnswer.objects.filter(question_id="team").order_by("id"))
        for old, new in zip(answers[:30], answers[30:], strict=True):
            new.label = old.label
            new.save(update_fields=["label"])

    await db(label_like_before)
    second = await db(lambda: calibrate("--question-key", key, "--min-labels", "30"))
    answers = await db(lambda: list(EvaluationAnswer.objects.filter(question_id="team").order_by("id")))

    def scored(*, before_calibration: bool) -> list[Scored]:
        return [
            Scored(
                probabilities=[
                    (
                        a.uncalibrated_probabilities
                        if before_calibration and a.uncalibrated_probabilities
                        else a.probabilities
                    )[k]
                    for k in KEYS
                ],
                label=KEYS.index(a.label),
            )
            for a in answers
        ]

    assert all(a.calibration_id == first["id"] for a in answers[30:])
    expected, _ = calibration_fit(items=scored(before_calibration=True), vector=False)
    on_top, _ = calibration_fit(items=scored(before_calibration=False), vector=False)
    assert math.isclose(second["temperature"], expected.temperature, rel_tol=1e-9)
    assert not math.isclose(second["temperature"], on_top.temperature, rel_tol=1e-3)
    assert await db(lambda: Calibration.objects.filter(active=True).count()) == 1


def sentiment_define() -> None:
    classifier = Classifier.objects.create(name="sentiment", instructions="What is the sentiment of this text?")
    for position, name in enumerate(("positive", "negative", "neutral"), start=1):
        ClassifierLabel.objects.create(classifier=classifier, position=position, name=name)


async def test_a_classifier_is_calibrated_by_its_name_on_post_v1_classify(api, fake, store):
    await db(sentiment_define)
    texts = [f"Review {i}: {'great ' * (i % 4)}{'awful ' * (i % 3)}product" for i in range(24)]
    assert (await api.post("/v1/classify", json={"model": "sentiment", "input": texts})).status_code == 200
    await drained()

    def label_all() -> None:
        for i, answer in enumerate(EvaluationAnswer.objects.filter(evaluation__classifier_name="sentiment")):
            answer.label = ("positive", "negative", "neutral")[i % 3]
            answer.save(update_fields=["label"])

    await db(label_all)
    fitted = await db(lambda: calibrate("--classifier", "sentiment", "--activate", "--min-labels", "24"))
    calibration_cache_forget()
    response = await api.post("/v1/classify", json={"model": "sentiment", "input": texts[:2]})
    await drained()
    rid = response.headers["x-typesafe-request-id"]
    stored = await db(lambda: list(EvaluationAnswer.objects.filter(evaluation__request_id=rid).order_by("position")))

    assert fitted["report"]["n"] == 24 and response.headers["x-openjev-calibrated"] == "sentiment"
    calibrator = Calibrator(temperature=fitted["temperature"])
    for item, answer in zip(response.json()["data"], stored, strict=True):
        assert answer.uncalibrated_probabilities is not None and answer.calibration_id == fitted["id"]
        uncalibrated = [answer.uncalibrated_probabilities[k] for k in answer.option_keys]  # jsonb reorders keys
        expected = probabilities_served(probabilities_calibrate(probabilities=uncalibrated, calibrator=calibrator))
        assert item["probs"] == list(expected)


async def test_answers_streamed_over_the_websocket_are_calibrated_as_over_http(api, asgi_server, fake, store):
    key = await labelled_traffic(api, n=30)
    await db(lambda: calibrate("--question-key", key, "--vector", "--activate", "--min-labels", "30"))
    calibration_cache_forget()
    http = await api.post("/v1/systemone", json=team_request(2))
    async with connect(asgi_server.url.replace("http", "ws") + "/v1/systemone/stream") as ws:
        await send(ws, {"id": "s", **team_request(2)})
        (answer,) = of(await until_ended(ws, ["s"]), "s", "answer")

    assert http.headers["x-openjev-calibrated"] == "team"
    assert answer["answer"] == http.json()["answers"]["team"]
