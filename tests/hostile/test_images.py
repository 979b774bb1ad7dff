"""Image URLs, image lists and asset placeholders cost time linear in what the client sent, and reading stops at
the first image over the count allowed: the review's 500 URLs that end in a space took 92 s on the event loop,
and 20,000 placeholders over a 200,000-character state 12.5 s."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from api.checking.checker import Checker
from api.checking.images import ImageLimits, assets_check, image_of_url
from api.systemone.parsing import Limits, systemone_request_parse
from inference.errors import RequestInvalid
from tests.linear import assert_linear

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()
MODELS = frozenset({"jev-latest"})


def parse_problems(body: dict[str, Any], *, max_images: int) -> list[Any]:
    limits = Limits(max_questions=64, max_answers=255, images=ImageLimits(max_images=max_images))
    request = {"model": "jev-latest", "questions": {"q": {"type": "noul"}}, **body}
    with pytest.raises(RequestInvalid) as refused:
        systemone_request_parse(data=request, limits=limits, models=MODELS)
    return list(refused.value.problems)


def test_a_url_that_ends_in_a_space_costs_linear_time():
    limits = ImageLimits(max_images=1)
    assert_linear(lambda n: lambda: image_of_url(value="http://" + "a" * n + " ", loc=(), limits=limits), size=500)
    assert_linear(lambda n: lambda: image_of_url(value="https://a/" + "b" * n + " ", loc=(), limits=limits), size=500)


def test_a_url_over_the_length_limit_is_refused_before_it_is_read():
    problem = image_of_url(value="http://" + "a" * 10_000_000 + " ", loc=("x",), limits=ImageLimits(max_images=1))
    assert getattr(problem, "type", None) == "image_url"


@pytest.mark.parametrize("max_images", [0, 3])
def test_reading_images_stops_at_the_first_one_over_the_count(max_images):
    urls = ["http://" + "a" * 4088 + " "] * 500
    problems = parse_problems({"state": {"text": "x", "images": urls}}, max_images=max_images)
    assert len(problems) == max_images + 1  # the invalid ones read, then the first over the count
    assert problems[-1].type == ("too_many_images" if max_images else "images_not_supported")
    assert problems[-1].loc == ("state", "images", max_images)


def test_images_in_a_transcript_stop_at_the_first_one_over_the_count():
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PIXEL}}
    state = [{"role": "user", "content": [part] * 1_000}]
    problems = parse_problems({"state": state}, max_images=2)
    assert [(p.loc, p.type) for p in problems] == [(("state", 0, "content", 2, "image_url", "url"), "too_many_images")]


def test_assets_over_the_count_are_refused_without_reading_them():
    assets = {f"ph{i}": {"type": "image", "format": "png", "data_base64": "%%% not base64"} for i in range(20_000)}
    problems = parse_problems({"state": "x", "assets": assets}, max_images=3)
    assert [(p.loc, p.type) for p in problems] == [(("assets",), "too_many_images")]


def test_placeholders_that_each_almost_match_the_text_cost_linear_time():
    """64 placeholders `a…ab` of lengths up to the text's, over a text of `a`: each one matches almost to its end
    at every character, so a search that tries them one by one costs the text times their lengths."""
    image = {"type": "image", "format": "png", "data_base64": PIXEL}
    limits = ImageLimits(max_images=64)

    def work(n: int):
        placeholders = {"a" * (i * n // 64 + 1) + "b": image for i in range(64)}
        found, problems = assets_check(value=placeholders, parts={}, limits=limits)
        assert not problems
        checker = Checker(assets=found, limits=limits)
        return lambda: checker.parts("a" * n, ("state",))

    assert_linear(work, size=256)


def test_placeholders_split_the_text_at_the_longest_one_where_several_start():
    image = {"type": "image", "format": "png", "data_base64": PIXEL}
    limits = ImageLimits(max_images=8)
    found, _ = assets_check(value={"<a>": image, "<a><b>": image, "<b>": image}, parts={}, limits=limits)
    checker = Checker(assets=found, limits=limits)
    parts = checker.parts("x<a><b>y<b><a>", ("state",))
    assert [p if isinstance(p, str) else "IMG" for p in parts] == ["x", "IMG", "y", "IMG", "IMG"]
    assert len(checker.images) == 3


def test_placeholders_used_more_often_than_the_count_allows_stop_at_the_first_one_over():
    image = {"type": "image", "format": "png", "data_base64": PIXEL}
    problems = parse_problems({"state": "<a>" * 100_000, "assets": {"<a>": image}}, max_images=2)
    assert [p.type for p in problems] == ["too_many_images"]
