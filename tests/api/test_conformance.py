"""Drop-in compatibility against a real socket: the jevcompat conformance suite and the official SDK."""

from __future__ import annotations

import pytest
from jevcompat.runner import run as jevcompat_run


@pytest.fixture
def report(asgi_server):
    return jevcompat_run(asgi_server.url, timeout=60)


def test_jevcompat_reports_conformant_with_every_must_passing(report):
    summary = report.summary()
    failed = [(r.id, [f.message for f in r.findings]) for r in report.results if r.status == "fail"]
    assert summary["verdict"] == "conformant", (summary, failed, report.case_errors, report.inconclusive)
    assert summary["MUST"]["failed"] == 0
    assert summary["MUST"]["passed"] == 32, summary


def test_jevcompat_should_failures_are_only_our_documented_deviations(report):
    """Our spec answers a non-JSON body with 400 (jevcompat wants 422) and defaults to the entropy
    confidence (jevcompat checks TypeSafe's formula, available with OPENJEV_CONFIDENCE=typesafe)."""
    failed = {r.id for r in report.results if r.level == "SHOULD" and r.status == "fail"}
    assert failed == {"confidence.formula", "errors.validation-shape"}
    shape = next(r for r in report.results if r.id == "errors.validation-shape")
    assert all("not-json" in f.case for f in shape.findings)


def test_jevcompat_confidence_formula_passes_with_typesafe_confidence(asgi_server, fake, settings):
    from dataclasses import replace

    from evaluations.evaluator import evaluator_install
    from testbed.evaluators import fake_evaluator

    settings.OPENJEV = replace(settings.OPENJEV, confidence="typesafe")
    evaluator_install(fake_evaluator(fake, confidence="typesafe"))
    report = jevcompat_run(asgi_server.url, timeout=60, only={"choice-basic", "score-levels", "multi-question"})
    formula = next(r for r in report.results if r.id == "confidence.formula")
    assert formula.status == "pass", [f.message for f in formula.findings]


def test_official_sdk_parses_noul_choice_and_score(asgi_server):
    from typesafe_sdk import Choice, Noul, Score, TypeSafeClient

    with TypeSafeClient(api_key="any", base_url=asgi_server.url) as client:
        result = client.system_one(
            state="I was charged twice, refund me now!",
            questions={"refund": Noul(instructions="Is this a refund request?"),
                       "team": Choice(instructions="Team?", criteria={"Billing": "Payments", "Tech": "Bugs"}),
                       "anger": Score(instructions="Anger?", criteria=["Calm", "Annoyed", "Furious"])},
            model="jev-latest")
    assert 0 <= result.nouls["refund"].noul <= 1
    assert result.choices["team"].choice in {"Billing", "Tech"}
    assert 0 <= result.scores["anger"].score <= 2
