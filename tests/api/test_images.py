"""Images in the state over the API, on the fake SGLang with the real Qwen3 tokenizer: every accepted
wire form, the `image_data` that goes with the warm-up and every branch, limits and refusals."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from testbed.images import png_bytes
from tests.api.helpers import NOUL, assert_validation

PNG = png_bytes()
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
WEB_URL = "https://images.example.com/receipt.png"


@pytest.fixture
def vision(fake, settings, branch_mode):
    """A deployment that accepts up to 3 images, in either branch mode."""
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    evaluator_install(fake_evaluator(fake, branch_mode=branch_mode, max_images=3))


def body(state: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "jev-latest", "state": state, "questions": {"q": NOUL, "r": NOUL}, **extra}


def image_data_sent(fake) -> list[Any]:
    return [record["body"].get("image_data", "absent") for record in fake.requests]


def user_parts(*parts: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


async def test_image_url_parts_go_with_the_warm_up_and_every_branch(api, fake, vision, branch_mode):
    state = user_parts({"type": "text", "text": "Refund for this?"}, image_part(PNG_URL), image_part(WEB_URL))
    response = await api.post("/v1/systemone", json=body(state))
    assert response.status_code == 200, response.text
    sent = image_data_sent(fake)
    images = [PNG_URL, WEB_URL]
    if branch_mode == "batched":
        assert sent == [images, [images, images]]
    else:
        assert sent == [images, images, images]
    warm = fake.requests[0]["body"]["input_ids"]
    assert warm.count(151655) == 2 and warm.count(151652) == 2  # one placeholder per image, unexpanded
    assert response.json()["usage"]["input_tokens"] > 3 * len(warm)  # SGLang counts the expanded images


async def test_branches_hit_the_prefix_cache_with_the_images_and_another_image_does_not(api, fake, vision):
    async def cached_tokens(url: str) -> int:
        response = await api.post("/v1/systemone", json=body(user_parts(image_part(url))))
        assert response.status_code == 200, response.text
        return int(response.headers["x-openjev-cached-tokens"])

    first = await cached_tokens(PNG_URL)
    expanded_prefix = len(fake.requests[0]["body"]["input_ids"]) - 1 + fake.image_tokens
    assert first >= 2 * expanded_prefix  # both branches reuse the warm-up's prefix, images included
    fake.reset(controls=False, cache=False)
    other = await cached_tokens("data:image/png;base64," + base64.b64encode(png_bytes(rgb=(0, 0, 255))).decode())
    warm = fake.requests[0]
    assert warm["status"] == 200 and other >= 2 * expanded_prefix
    assert other - first < expanded_prefix  # the new image's warm-up found only the text before it cached


async def test_an_object_state_with_images_is_the_images_then_the_rest_as_json(api, fake, vision):
    state = {"ticket": "T-1", "images": [WEB_URL], "text": "broken on arrival"}
    response = await api.post("/v1/systemone", json=body(state))
    assert response.status_code == 200, response.text
    from testbed.qwen3 import qwen3_tokenizer

    prompt = qwen3_tokenizer().decode(fake.requests[0]["body"]["input_ids"])
    assert '<|vision_start|><|image_pad|><|vision_end|>{"ticket":"T-1","text":"broken on arrival"}' in prompt
    assert image_data_sent(fake)[0] == [WEB_URL]


async def test_inline_asset_placeholders_inside_the_state_become_images(api, fake, vision):
    data = base64.b64encode(PNG).decode()
    request = body(
        {"note": "see <img-1> and <img-2>"},
        assets={
            "<img-1>": {"type": "image", "format": "png", "data_base64": data},
            "<img-2>": {"type": "image", "format": "jpg", "data_base64": data},
        },
    )
    response = await api.post("/v1/systemone", json=request)
    assert response.status_code == 200, response.text
    assert image_data_sent(fake)[0] == [PNG_URL, PNG_URL]  # bytes as data: URLs, the detected format named


async def test_text_only_requests_send_no_image_data_key(api, fake, vision):
    response = await api.post("/v1/systemone", json=body("just text"))
    assert response.status_code == 200
    assert set(image_data_sent(fake)) == {"absent"}


async def test_images_are_refused_where_the_deployment_takes_none(api, fake):
    response = await api.post("/v1/systemone", json=body(user_parts(image_part(WEB_URL))))
    assert_validation(response, ["body", "state", 0, "content", 0, "image_url", "url"])
    assert response.json()["detail"][0]["type"] == "images_not_supported"
    assert fake.requests == []


async def test_an_evaluator_that_cannot_see_refuses_images(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)  # the API takes images, the evaluator cannot see
    response = await api.post("/v1/systemone", json=body({"images": [WEB_URL]}))
    assert_validation(response, ["body", "state"])
    assert response.json()["detail"][0]["type"] == "images_not_supported"
    assert fake.requests == []


INVALID: dict[str, tuple[dict[str, Any], list[str | int], str]] = {
    "too many": (body({"images": [WEB_URL] * 4}), ["body", "state"], "too_many_images"),
    "not an image": (
        body({"images": ["data:image/png;base64," + base64.b64encode(b"GIF89a....").decode()]}),
        ["body", "state", "images", 0],
        "image_format",
    ),
    "not base64": (
        body(user_parts({"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}})),
        ["body", "state", 0, "content", 0, "image_url", "url"],
        "image_base64",
    ),
    "a local file": (
        body(user_parts({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}})),
        ["body", "state", 0, "content", 0, "image_url", "url"],
        "image_url",
    ),
    "in an assistant message": (
        body([{"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": WEB_URL}}]}]),
        ["body", "state", 0, "content"],
        "unsupported_content",
    ),
    "in a question": (
        body(
            "see <a>",
            assets={"<a>": {"format": "png", "data_base64": base64.b64encode(PNG).decode()}},
            questions={"q": {"type": "noul", "instructions": "Is <a> blurry?"}},
        ),
        ["body", "questions", "q"],
        "unsupported_content",
    ),
    "asset without data": (
        body("x <a>", assets={"<a>": {"type": "image"}}),
        ["body", "assets", "<a>", "data_base64"],
        "missing",
    ),
    "empty assets": (body("x", assets={}), ["body", "assets"], "dict_type"),
}


@pytest.mark.parametrize("case", list(INVALID))
async def test_invalid_images_get_a_located_422_and_no_backend_call(api, fake, vision, case):
    request, loc, kind = INVALID[case]
    response = await api.post("/v1/systemone", json=request)
    assert_validation(response, loc)
    assert kind in {d["type"] for d in response.json()["detail"]}, response.text
    assert fake.requests == []
    assert "etc/passwd" not in response.text and "GIF89a" not in response.text


async def test_an_image_over_the_byte_limit_is_refused(api, fake, vision, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_image_bytes=len(PNG) - 1)
    response = await api.post("/v1/systemone", json=body({"images": [PNG_URL]}))
    assert_validation(response, ["body", "state", "images", 0])
    assert response.json()["detail"][0]["type"] == "image_too_large"


async def test_limits_report_max_images(api, fake, vision):
    limits = (await api.get("/v1/limits")).json()
    assert limits["max_images"] == 3 and limits["max_image_bytes"] == 1 << 20
