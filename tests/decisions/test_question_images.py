"""Images in a question's `instructions` (`input_image` parts) on `POST /v1/decisions`, on the SGLang stand-in with the
real Qwen3 tokenizer: the image goes with that question's branch only, after the input's; the evaluator that cannot
see (the embedded engine's kind) refuses it at its part; it counts against the request's image limits."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import pytest

from fake_sglang.images import images_per_item
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from testbed.images import png_bytes
from testbed.qwen3 import qwen3_tokenizer
from tests.decisions.helpers import PATH, assert_openai_error, decision_of, decision_with, question_with

PNG = png_bytes()
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
BLUE_URL = "data:image/png;base64," + base64.b64encode(png_bytes(rgb=(0, 0, 255))).decode()
LOGO_TEXT = "Does the receipt show this logo:"
PAD = 151655


def logo_question(url: str = PNG_URL, **fields: Any) -> dict[str, Any]:
    parts = [{"type": "input_text", "text": LOGO_TEXT}, {"type": "input_image", "image_url": url, "detail": "low"}]
    return question_with(instructions=parts, **fields)


def with_questions(*questions: dict[str, Any], input: Any = "Receipt #12: two coffees, 7.40 EUR") -> dict[str, Any]:
    return decision_with(input=input, questions=list(questions))


@pytest.fixture
def sees(fake, settings, branch_mode):
    """A deployment that takes up to 3 images, in either branch mode."""
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    evaluator_install(fake_evaluator(fake, branch_mode=branch_mode, max_images=3))


def items_sent(fake) -> list[tuple[str, list[str]]]:
    """Every /generate item the stand-in received, as (its prompt's text, its images), read from the request bodies
    as SGLang normalises them (a batch's `image_data` per item)."""
    tokenizer = qwen3_tokenizer()
    items = []
    for record in fake.requests:
        body = record["body"]
        batched = isinstance(body["input_ids"][0], list)
        prompts = body["input_ids"] if batched else [body["input_ids"]]
        images = images_per_item(body.get("image_data"), len(prompts), batched=batched)
        items += [(tokenizer.decode(ids), found) for ids, found in zip(prompts, images, strict=True)]
    return items


async def test_a_questions_image_goes_with_its_branch_only(api, fake, sees):
    response = await api.post(PATH, json=with_questions(question_with(), logo_question(name="logo")))
    decision = decision_of(response)
    assert [a.name for a in decision.answers] == [None, "logo"]
    items = items_sent(fake)
    assert len(items) == 3  # the warm-up and two branches
    warm = next(images for text, images in items if "Question:" not in text)
    logo = [images for text, images in items if LOGO_TEXT in text]
    other = [images for text, images in items if "Question:" in text and LOGO_TEXT not in text]
    assert warm == [] and logo == [[PNG_URL]] and other == [[]]
    prompt = next(text for text, _ in items if LOGO_TEXT in text)
    assert f"{LOGO_TEXT}<|vision_start|><|image_pad|><|vision_end|>" in prompt and "base64" not in prompt
    assert sorted(map(str, (images for _, images in fake.item_images))) == sorted(map(str, ([], [], [PNG_URL])))


async def test_the_inputs_images_come_first_in_every_branch_and_the_questions_own_after_them(api, fake, sees):
    content = [{"type": "input_text", "text": "The receipt:"}, {"type": "input_image", "image_url": BLUE_URL}]
    body = with_questions(question_with(), logo_question(), input=[{"role": "user", "content": content}])
    decision_of(await api.post(PATH, json=body))
    by_kind = {
        "warm": [images for text, images in items_sent(fake) if "Question:" not in text],
        "logo": [images for text, images in items_sent(fake) if LOGO_TEXT in text],
        "text": [images for text, images in items_sent(fake) if "Question:" in text and LOGO_TEXT not in text],
    }
    assert by_kind == {"warm": [[BLUE_URL]], "logo": [[BLUE_URL, PNG_URL]], "text": [[BLUE_URL]]}


async def test_the_same_question_with_an_image_answers_as_it_does_with_another_one(api, fake, sees):
    """The stand-in values an image's placeholder by the image's hash: another image is another prompt."""
    first = decision_of(await api.post(PATH, json=with_questions(logo_question())))
    again = decision_of(await api.post(PATH, json=with_questions(logo_question())))
    other = decision_of(await api.post(PATH, json=with_questions(logo_question(BLUE_URL))))
    p = [d.answers[0].probability for d in (first, again, other)]  # type: ignore[union-attr]
    assert p[0] == p[1] != p[2]


async def test_an_evaluator_that_cannot_see_refuses_a_questions_image_at_its_part(api, fake, settings):
    """The default evaluator has no vision, as the embedded engine's: the deployment takes images, the model not."""
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    response = await api.post(PATH, json=with_questions(question_with(), logo_question()))
    error = assert_openai_error(response, 400, code="images_not_supported", param="questions[1].instructions[1]")
    assert "cannot see images" in error["message"]
    assert fake.generate_calls == 0


async def test_a_deployment_that_takes_no_images_refuses_a_questions_image_where_it_stands(api, fake):
    response = await api.post(PATH, json=with_questions(logo_question()))
    assert_openai_error(response, 400, code="images_not_supported", param="questions[0].instructions[1].image_url")
    assert fake.generate_calls == 0


async def test_question_images_count_against_the_requests_image_limits(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_images=1)
    evaluator_install(fake_evaluator(fake, max_images=1))
    assert (await api.post(PATH, json=with_questions(logo_question()))).status_code == 200
    content = [{"type": "input_image", "image_url": BLUE_URL}]
    both = with_questions(logo_question(), input=[{"role": "user", "content": content}])
    response = await api.post(PATH, json=both)  # the same question again: read again, not from the parse cache
    assert_openai_error(response, 400, code="too_many_images", param="questions[0].instructions[1].image_url")
    two = with_questions(logo_question(), logo_question(BLUE_URL))
    assert_openai_error(
        await api.post(PATH, json=two), 400, code="too_many_images", param="questions[1].instructions[1].image_url"
    )
    assert fake.generate_calls == 2  # the first request only: its warm-up and branch


async def test_question_images_count_against_the_byte_limits(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3, max_request_image_bytes=2 * len(PNG) - 1)
    evaluator_install(fake_evaluator(fake, max_images=3))
    content = [{"type": "input_image", "image_url": BLUE_URL}]
    both = with_questions(logo_question(), input=[{"role": "user", "content": content}])
    assert_openai_error(await api.post(PATH, json=both), 400, code="images_too_large", param="input")
    settings.OPENJEV = replace(settings.OPENJEV, max_image_bytes=len(PNG) - 1)
    response = await api.post(PATH, json=with_questions(logo_question()))
    assert_openai_error(response, 400, code="image_too_large", param="questions[0].instructions[1].image_url")
    assert fake.generate_calls == 0


@pytest.mark.parametrize(
    ("part", "param", "code"),
    [
        ({"type": "input_image"}, "questions[0].instructions[0].image_url", "missing_required_parameter"),
        ({"type": "input_image", "image_url": PNG_URL, "file_id": "f"}, "questions[0].instructions[0].file_id", None),
        ({"type": "input_image", "image_url": "data:image/png;base64,%%%"}, None, "image_base64"),
        ({"type": "input_image", "image_url": "https://example.com/a.png"}, None, "image_url_not_supported"),
        ({"type": "input_file", "file_id": "f"}, "questions[0].instructions[0]", "invalid_value"),
        ({"type": {"input_image": True}}, "questions[0].instructions[0]", "invalid_value"),  # not a 500
    ],
)
async def test_an_invalid_image_part_is_a_400_at_the_part(api, fake, sees, part, param, code):
    body = with_questions(question_with(instructions=[part, {"type": "input_text", "text": "Is it?"}]))
    error = assert_openai_error(await api.post(PATH, json=body), 400, code=code)
    assert error["param"].startswith(param or "questions[0].instructions[0]")
    assert fake.generate_calls == 0


async def test_a_questions_image_is_debiased_with_its_own_prior_measured_once_per_image(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    evaluator_install(fake_evaluator(fake, max_images=3, debias="on"))

    async def with_image(url: str) -> list[list[str]]:
        fake.reset(controls=False, cache=False)
        decision_of(await api.post(PATH, json=with_questions(logo_question(url))))
        return [images for text, images in items_sent(fake) if LOGO_TEXT in text]

    assert await with_image(PNG_URL) == [[PNG_URL], [PNG_URL]]  # its branch, and its prior (with its image)
    assert await with_image(PNG_URL) == [[PNG_URL]]  # the prior is known
    assert await with_image(BLUE_URL) == [[BLUE_URL], [BLUE_URL]]  # another image: another prior
