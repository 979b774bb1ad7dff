"""Hosted image URLs over the API (`OPENJEV_IMAGE_URL_HOSTS`): off by default, each route as it was; once hosts are
allowed, every route takes only those hosts' https URLs, fetches them itself (from the loopback HTTPS server of
`tests/api/image_server.py`, through the fetcher's test seams) and sends the backend bytes, never the client's URL;
every failure a 400 (System One: 422) located at the image, and nothing reaches the backend."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from api.checking import image_fetch
from api.checking.image_download import Fetcher
from api.checking.images import ImageLimits
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from tests.api.helpers import NOUL
from tests.api.image_server import PNG, ImageServer, image_server
from tests.api.test_image_fetch import loopback_only
from tests.decisions.helpers import PATH, assert_openai_error, decision_of, decision_with, question_with

PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@pytest.fixture(scope="module")
def server() -> Iterator[ImageServer]:
    with image_server() as found:
        yield found


@pytest.fixture
def served(server: ImageServer) -> ImageServer:
    server.seen.clear()
    return server


@pytest.fixture
def sees(fake, settings):
    """A deployment that takes up to 3 images (hosted URLs off: the default)."""
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    evaluator_install(fake_evaluator(fake, max_images=3))


@pytest.fixture
def hosts(sees, settings, served, monkeypatch) -> ImageServer:
    """`localhost` allowed, fetched from the loopback server with its certificate trusted (the test seams)."""
    settings.OPENJEV = replace(settings.OPENJEV, image_url_hosts=("localhost",), image_fetch_timeout=2.0)

    def loopback_fetcher(*, limits: ImageLimits) -> Fetcher:
        return Fetcher(
            timeout=2.0,
            max_bytes=limits.max_image_bytes,
            address_allowed=loopback_only,
            ssl_context=served.client_context,
        )

    monkeypatch.setattr(image_fetch, "fetcher_configured", loopback_fetcher)
    return served


def images_sent(fake) -> list[Any]:
    return [record["body"].get("image_data", "absent") for record in fake.requests]


def google_violations(response: Any) -> list[tuple[str, str]]:
    """(field, reason) of every problem of a Google 400."""
    assert response.status_code == 400, response.text
    (found,) = [d["fieldViolations"] for d in response.json()["error"]["details"] if d["@type"].endswith("BadRequest")]
    return [(v["field"], v["reason"]) for v in found]


def google_body(block: dict[str, Any]) -> dict[str, Any]:
    return {"model": "jev-latest", "input": [block], "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}


def user_image(url: str, text: str = "Is this the receipt?") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": url}]}
    ]


# -- Off by default ---------------------------------------------------------------------------------------------------


async def test_off_by_default_every_route_is_as_it_was_and_nothing_is_fetched(api, fake, sees, served):
    url = served.url("/logo.png")
    decisions = await api.post(PATH, json=decision_with(input=user_image(url)))
    assert_openai_error(decisions, 400, code="image_url_not_supported", param="input[0].content[1].image_url")
    google = await api.post(PATH, json=google_body({"type": "image", "uri": url}))
    assert google_violations(google) == [("input[0].uri", "image_uri_not_supported")]
    assert fake.generate_calls == 0
    systemone = await api.post(
        "/v1/systemone",
        json={"model": "jev-latest", "state": {"images": [url]}, "questions": {"q": NOUL}},
    )
    assert systemone.status_code == 200, systemone.text
    assert images_sent(fake)[0] == [url]  # System One's URL goes to the backend as sent, which fetches it itself
    assert served.seen == []


# -- Allowed hosts: fetched here, sent as bytes ------------------------------------------------------------------------


async def test_an_allowed_hosts_image_in_the_input_is_fetched_and_sent_as_bytes(api, fake, hosts):
    decision_of(await api.post(PATH, json=decision_with(input=user_image(hosts.url("/logo.png")))))
    assert images_sent(fake)[0] == [PNG_URL] and all(PNG_URL in str(sent) for sent in images_sent(fake))
    assert "https://" not in str(fake.requests)
    assert [s.path for s in hosts.seen] == ["/logo.png"]


async def test_an_allowed_hosts_image_in_a_questions_instructions_is_fetched_into_its_branch(api, fake, hosts):
    parts = [
        {"type": "input_text", "text": "Is this logo on it?"},
        {"type": "input_image", "image_url": hosts.url("/logo.png")},
    ]
    body = decision_with(input="Receipt #12", questions=[question_with(), question_with(instructions=parts)])
    decision_of(await api.post(PATH, json=body))
    assert sorted(map(str, (images for _, images in fake.item_images))) == sorted(map(str, ([], [], [PNG_URL])))


async def test_the_same_url_twice_is_fetched_once_and_counts_as_two_images(api, fake, hosts, settings):
    url = hosts.url("/logo.png")
    body = decision_with(
        input=user_image(url), questions=[question_with(instructions=[{"type": "input_image", "image_url": url}])]
    )
    decision_of(await api.post(PATH, json=body))
    assert [s.path for s in hosts.seen] == ["/logo.png"]
    settings.OPENJEV = replace(settings.OPENJEV, max_request_image_bytes=2 * len(PNG) - 1)
    response = await api.post(PATH, json=body)  # fetched bytes count against the request's bytes too
    assert_openai_error(response, 400, code="images_too_large", param="input")


@pytest.mark.parametrize(
    ("path", "code", "words"),
    [
        ("/redirect", "image_fetch_failed", "redirects are not followed"),
        ("/endless", "image_too_large", "over the limit"),
        ("/text", "image_format", "not an image"),
        ("/missing.png", "image_fetch_failed", "HTTP 404"),
        ("/slow", "image_fetch_failed", "within 2 s"),
    ],
)
async def test_a_url_that_cannot_be_fetched_is_a_400_at_the_image_and_no_backend_call(
    api, fake, hosts, path, code, words
):
    response = await api.post(PATH, json=decision_with(input=user_image(hosts.url(path))))
    error = assert_openai_error(response, 400, code=code, param="input[0].content[1].image_url")
    assert words in error["message"] and fake.generate_calls == 0


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://localhost/logo.png", "only https"),
        ("https://images.example.com/logo.png", "OPENJEV_IMAGE_URL_HOSTS"),
        ("https://user@localhost/logo.png", "credentials"),
    ],
)
async def test_a_url_that_is_not_an_allowed_hosts_https_url_is_refused_without_a_request(api, fake, hosts, url, words):
    response = await api.post(PATH, json=decision_with(input=user_image(url)))
    error = assert_openai_error(response, 400, code="image_url_not_allowed", param="input[0].content[1].image_url")
    assert words in error["message"] and hosts.seen == [] and fake.generate_calls == 0


async def test_googles_uri_is_fetched_from_an_allowed_host(api, fake, hosts):
    block = {"type": "image", "uri": hosts.url("/logo.png"), "mime_type": "image/png"}
    response = await api.post(PATH, json=google_body(block))
    assert response.status_code == 200, response.text
    assert images_sent(fake)[0] == [PNG_URL]
    refused = await api.post(PATH, json=google_body({**block, "uri": "https://evil.net/a.png"}))
    assert google_violations(refused) == [("input[0].uri", "image_url_not_allowed")]
    not_fetched = await api.post(PATH, json=google_body({**block, "uri": hosts.url("/redirect")}))
    assert google_violations(not_fetched) == [("input[0].uri", "image_fetch_failed")]
    both = await api.post(PATH, json=google_body({**block, "data": base64.b64encode(PNG).decode()}))
    assert google_violations(both) == [("input[0]", "invalid_value")]


async def test_system_one_takes_the_same_rule_once_hosts_are_allowed(api, fake, hosts):
    ok = await api.post(
        "/v1/systemone",
        json={"model": "jev-latest", "state": {"images": [hosts.url("/logo.png")]}, "questions": {"q": NOUL}},
    )
    assert ok.status_code == 200, ok.text
    assert images_sent(fake)[0] == [PNG_URL]  # the backend no longer fetches a client's URL
    fake.reset(controls=False)
    refused = await api.post(
        "/v1/systemone",
        json={
            "model": "jev-latest",
            "state": {"images": ["https://images.example.com/a.png"]},
            "questions": {"q": NOUL},
        },
    )
    assert refused.status_code == 422
    assert [(d["loc"], d["type"]) for d in refused.json()["detail"]] == [
        (["body", "state", "images", 0], "image_url_not_allowed")
    ]
    fetch_failed = await api.post(
        "/v1/systemone",
        json={"model": "jev-latest", "state": {"images": [hosts.url("/text")]}, "questions": {"q": NOUL}},
    )
    assert fetch_failed.status_code == 422 and fetch_failed.json()["detail"][0]["type"] == "image_format"
    assert fake.generate_calls == 0
