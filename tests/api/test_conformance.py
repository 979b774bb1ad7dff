"""Drop-in compatibility against a real socket: the jevcompat conformance suite (with a key, so its
authentication checks run) and the official SDK."""

from __future__ import annotations

from dataclasses import replace

import pytest
from jevcompat.runner import run as jevcompat_run

from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator

KEY = "oj-conformance-suite-key"


@pytest.fixture
def keyed(settings):
    """Auth on with one key: the suite then also checks that a missing or wrong key gets a 401."""
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY)


@pytest.fixture
def report(asgi_server, keyed):
    return jevcompat_run(asgi_server.url, key=KEY, timeout=60)


pytestmark = pytest.mark.django_db(transaction=True)  # a wrong key is looked up among the issued keys


def test_jevcompat_reports_conformant_with_every_must_passing(report):
    summary = report.summary()
    failed = [(r.id, [f.message for f in r.findings]) for r in report.results if r.status == "fail"]
    assert summary["verdict"] == "conformant", (summary, failed, report.case_errors, report.inconclusive)
    assert summary["MUST"]["failed"] == 0
    assert summary["MUST"]["passed"] == 32, summary


def test_jevcompat_should_failures_are_only_the_default_confidence_formula(report):
    """We default to the entropy confidence (the seed's); jevcompat checks TypeSafe's formula, which
    OPENJEV_CONFIDENCE=typesafe gives. The authentication SHOULDs run (a key was given) and pass."""
    failed = {r.id for r in report.results if r.level == "SHOULD" and r.status == "fail"}
    assert failed == {"confidence.formula"}
    statuses = {r.id: r.status for r in report.results}
    assert [statuses[check] for check in ("auth.bearer", "auth.missing", "auth.invalid")] == ["pass"] * 3


def test_jevcompat_every_should_passes_with_typesafe_confidence(asgi_server, fake, settings, keyed):
    settings.OPENJEV = replace(settings.OPENJEV, confidence="typesafe")
    evaluator_install(fake_evaluator(fake, confidence="typesafe"))
    summary = jevcompat_run(asgi_server.url, key=KEY, timeout=60).summary()
    assert summary["MUST"] == {**summary["MUST"], "passed": 32, "failed": 0}, summary
    assert summary["SHOULD"]["failed"] == 0 and summary["SHOULD"]["passed"] == summary["SHOULD"]["tested"] == 14, (
        summary
    )


def test_official_sdk_parses_noul_choice_and_score(asgi_server):
    from typesafe_sdk import Choice, Noul, Score, TypeSafeClient

    with TypeSafeClient(api_key=KEY, base_url=asgi_server.url) as client:
        result = client.system_one(
            state="I was charged twice, refund me now!",
            questions={
                "refund": Noul(instructions="Is this a refund request?"),
                "team": Choice(instructions="Team?", criteria={"Billing": "Payments", "Tech": "Bugs"}),
                "anger": Score(instructions="Anger?", criteria=["Calm", "Annoyed", "Furious"]),
            },
            model="jev-latest",
        )
    assert 0 <= result.nouls["refund"].noul <= 1
    assert result.choices["team"].choice in {"Billing", "Tech"}
    assert 0 <= result.scores["anger"].score <= 2


@pytest.fixture
def vision(fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_images=2)
    evaluator_install(fake_evaluator(fake, max_images=2))


@pytest.mark.parametrize("compression", [None, False])
def test_official_sdk_sends_an_image_asset_as_multipart_end_to_end(asgi_server, fake, vision, compression):
    """The SDK uploads the image as a multipart part (zstd-compressed where it can); the model gets it as
    a `data:` URL beside the placeholder its reference stood for."""
    import base64

    from typesafe_sdk import Image, Noul, TypeSafeClient

    from testbed.images import png_bytes

    photo = png_bytes(width=32, height=16)
    image = Image(photo)
    with (
        TypeSafeClient(api_key=KEY, base_url=asgi_server.url, compression=compression) as client,
        client.attach_assets(image),
    ):
        result = client.system_one(
            state=f"Is the parcel in this photo damaged? {image}",
            questions={"damaged": Noul(instructions="Is it damaged?")},
            model="jev-latest",
        )
    assert 0 <= result.nouls["damaged"].noul <= 1
    url = "data:image/png;base64," + base64.b64encode(photo).decode()
    assert [record["body"]["image_data"] for record in fake.requests] == [[url], [url]]
