"""Google's Decisions shape through the ASGI application on the SGLang stand-in: its questions compile to System
One's prompts (the real Qwen3 tokenizer), every input form, what it refuses and how, Google's error shape before
and after the body is read, the key as `x-goog-api-key`, and what the shared plumbing reports of it."""

from __future__ import annotations

import base64
import copy
import json
import math
import weakref
from dataclasses import replace
from typing import Any

import httpx
import pytest

from api.checking.images import ImageLimits
from api.checking.limits import Limits, ModelUnknown
from api.google import errors as google_errors
from api.google.openapi import GOOGLE_REQUEST
from api.google.parsing import GoogleRequest, google_request_parse
from api.google.render import answer_render
from api.plumbing import ratelimits_bad_keys, ratelimits_store
from api.plumbing.metering import decision_system
from api.systemone.parsing import systemone_request_parse
from inference.errors import RequestInvalid
from inference.images import Image
from inference.prompts import Budget, plan_compile
from inference.questions import question_build
from inference.requests import EvaluationRequest, Message
from inference.scoring import Answer
from serving.access_log import log_line_redact
from serving.evaluator import evaluator_install
from testbed.evaluators import fake_evaluator
from testbed.images import png_bytes
from testbed.qwen3 import qwen3_labels, qwen3_tokenizer
from tests.conftest import README_REQUEST

PATH = "/v1/decisions"
MODELS = frozenset({"jev-latest"})
LIMITS = Limits(max_questions=400, max_answers=255, images=ImageLimits(4))
PNG = png_bytes()
PNG_BASE64 = base64.b64encode(PNG).decode()
BUDGET = Budget(max_input_tokens=32768, max_total_input_tokens=262144)
KEY = "sk-google-right"


def google_with(**changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(GOOGLE_REQUEST), **changes}


def parsed(body: dict[str, Any]) -> GoogleRequest:
    return google_request_parse(data=body, limits=LIMITS, models=MODELS)


def systemone_parsed(body: dict[str, Any]) -> EvaluationRequest:
    return systemone_request_parse(data=body, limits=LIMITS, models=MODELS).evaluation


def compiled(evaluation: EvaluationRequest) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """The shared prefix's token ids and every branch's, as the Qwen3 tokenizer and chat template make them."""
    plan = plan_compile(
        conversation=evaluation.conversation,
        questions=evaluation.questions,
        tokenizer=qwen3_tokenizer(),
        labels=qwen3_labels(),
        budget=BUDGET,
    )
    return plan.prefix.ids, [tuple(branch.suffix_ids) for branch in plan.branches]


def google_error(response: httpx.Response, status: int) -> dict[str, Any]:
    """An error in Google's shape: `code` the status, `status` its name, an `ErrorInfo` first."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"code", "message", "status", "details"} and error["code"] == status
    assert error["status"] == google_errors.status_name(status)
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert response.headers["x-typesafe-request-id"] == response.headers["x-request-id"]
    return error


def violations(error: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, reason) of every problem a 400 lists."""
    (found,) = [d["fieldViolations"] for d in error["details"] if d["@type"].endswith("BadRequest")]
    return [(v["field"], v["reason"]) for v in found]


# -- The same questions, the same prompts ------------------------------------------------------------------------

TWINS = [
    pytest.param(GOOGLE_REQUEST, README_REQUEST, id="the README questions"),
    pytest.param(
        google_with(
            input=[{"type": "text", "text": "Charged twice."}, {"type": "text", "text": "Fix it!"}],
            questions={
                "refund": {
                    "type": "noul",
                    "instructions": [{"type": "text", "text": "Refund"}, {"type": "text", "text": "request?"}],
                    "criteria": {"true_description": "Money back is asked for", "false_description": ""},
                },
                "team": {
                    "type": "choice",
                    "instructions": {"type": "text", "text": "Which team?"},
                    "criteria": {"Billing": "", "Technical": "Bugs, outages", "Sales": None},
                },
            },
        ),
        {
            "model": "jev-latest",
            "state": "Charged twice.\nFix it!",
            "questions": {
                "refund": {
                    "type": "noul",
                    "instructions": "Refund\nrequest?",
                    "criteria": {"true": "Money back is asked for"},
                },
                "team": {
                    "type": "choice",
                    "instructions": "Which team?",
                    "criteria": {"Billing": None, "Technical": "Bugs, outages", "Sales": None},
                },
            },
        },
        id="text blocks, noul sides, empty and null descriptions",
    ),
]


@pytest.mark.parametrize(("google", "systemone"), TWINS)
def test_googles_question_compiles_to_the_prompt_of_system_ones_identical_question(google, systemone):
    """The core request is the same (the conversation, and every question's identity: type, instructions,
    options), so the prompts are the same token for token."""
    ours, theirs = parsed(google).evaluation, systemone_parsed(systemone)
    assert ours.conversation == theirs.conversation
    assert [q.identity for q in ours.questions] == [q.identity for q in theirs.questions]
    assert [q.levels for q in ours.questions] == [q.levels for q in theirs.questions]
    assert compiled(ours) == compiled(theirs)


async def test_the_same_questions_get_the_same_probabilities_as_on_systemone(api, fake):
    systemone = (await api.post("/v1/systemone", json=README_REQUEST)).json()["answers"]
    response = await api.post(PATH, json=GOOGLE_REQUEST)
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert answers["refund"]["noul"] == systemone["refund"]["noul"]  # within [0.01, 0.99] here
    for qid in ("team", "anger"):
        assert answers[qid]["probabilities"] == systemone[qid]["probabilities"]
        assert answers[qid]["confidence"] == max(systemone[qid]["probabilities"].values())
    assert answers["anger"]["score"] == systemone["anger"]["score"]
    assert answers["anger"]["legend"] == systemone["anger"]["legend"]
    assert response.headers["x-openjev-model"] and float(response.headers["x-openjev-label-mass"]) > 0


@pytest.fixture
def vision(fake, settings):
    """A deployment that takes up to 3 images."""
    settings.OPENJEV = replace(settings.OPENJEV, max_images=3)
    evaluator_install(fake_evaluator(fake, max_images=3))


async def test_an_image_block_is_system_ones_image_where_it_stands(api, fake, vision):
    google = google_with(
        input=[
            {"type": "text", "text": "Refund for this receipt?"},
            {"type": "image", "data": PNG_BASE64, "mime_type": "image/png", "resolution": "low"},
            {"type": "text", "text": "It was charged twice."},
        ]
    )
    content = [
        {"type": "text", "text": "Refund for this receipt?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_BASE64}"}},
        {"type": "text", "text": "It was charged twice."},
    ]
    systemone = {**README_REQUEST, "state": [{"role": "user", "content": content}]}
    (message,) = parsed(google).evaluation.conversation
    assert isinstance(message, Message) and [type(p) for p in message.content] == [str, Image, str]
    ours = await api.post(PATH, json=google)
    theirs = await api.post("/v1/systemone", json=systemone)
    assert ours.status_code == theirs.status_code == 200, ours.text
    assert ours.json()["answers"]["team"]["probabilities"] == theirs.json()["answers"]["team"]["probabilities"]
    usage = ours.json()["usage"]
    assert "input_tokens_by_modality" not in usage  # the backends do not count image tokens apart
    assert usage["total_input_tokens"] == theirs.json()["usage"]["input_tokens"]


# -- What is refused, located ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("input_", "field", "reason"),
    [
        (
            [{"type": "text", "text": "x"}, {"type": "image", "uri": "https://example.com/a.png"}],
            "input[1].uri",
            "image_uri_not_supported",
        ),
        (
            [{"type": "document", "data": "JVBERi0=", "mime_type": "application/pdf"}],
            "input[0].type",
            "unsupported_content",
        ),
        ({"type": "audio", "data": "AAAA"}, "input.type", "unsupported_content"),
        ([{"type": "video", "uri": "https://example.com/v.mp4"}], "input[0].type", "unsupported_content"),
        ([{"type": "image", "data": PNG_BASE64, "mime_type": "image/heic"}], "input[0].mime_type", "image_format"),
        ([{"type": "image", "data": "not base64!"}], "input[0].data", "image_base64"),
        ([], "input", "empty_input"),
        (42, "input", "invalid_type"),
    ],
    ids=["an image uri", "a document", "audio", "video", "heic", "bad base64", "no blocks", "a number"],
)
async def test_input_that_cannot_be_read_is_a_located_400(api, fake, vision, input_, field, reason):
    response = await api.post(PATH, json=google_with(input=input_))
    error = google_error(response, 400)
    assert violations(error) == [(field, reason)]
    assert fake.generate_calls == 0


async def test_an_image_where_the_model_cannot_see_is_a_located_400(api, fake):
    response = await api.post(PATH, json=google_with(input=[{"type": "image", "data": PNG_BASE64}]))
    assert violations(google_error(response, 400)) == [("input[0]", "images_not_supported")]


async def test_an_image_uri_says_to_send_data_and_nothing_is_fetched(api, fake, vision):
    response = await api.post(PATH, json=google_with(input=[{"type": "image", "uri": "https://example.com/a.png"}]))
    error = google_error(response, 400)
    assert "send the image's bytes as base64 `data`" in error["message"] and fake.generate_calls == 0


@pytest.mark.parametrize(
    ("questions", "expected"),
    [
        ({"q": {"type": "box", "instructions": "The dog"}}, [("questions.q.type", "invalid_value")]),
        ({"q": {"instructions": "Yes?"}}, [("questions.q.type", "missing")]),
        ({"q": {"type": ["noul"], "instructions": "Yes?"}}, [("questions.q.type", "invalid_value")]),
        ({"q": {"type": {"noul": 1}, "instructions": "Yes?"}}, [("questions.q.type", "invalid_value")]),
        (
            {"q": {"type": "noul", "instructions": [{"type": ["text"], "text": "Yes?"}]}},
            [("questions.q.instructions[0].type", "invalid_value")],
        ),
        ({"q": {"type": "noul"}}, [("questions.q.instructions", "missing")]),
        (
            {"q": {"type": "noul", "instructions": [{"type": "image", "data": PNG_BASE64}]}},
            [("questions.q.instructions[0].type", "unsupported_content")],
        ),
        (
            {"q": {"type": "noul", "instructions": "Yes?", "criteria": {"true": "y"}}},
            [("questions.q.criteria.true", "unknown_field")],
        ),
        ({"q": {"type": "noul", "instructions": "Yes?", "name": "x"}}, [("questions.q.name", "unknown_field")]),
        ({"q": {"type": "choice", "instructions": "Which?"}}, [("questions.q.criteria", "missing")]),
        (
            {"q": {"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]}},
            [("questions.q.criteria", "invalid_type")],
        ),
        (
            {"q": {"type": "choice", "instructions": "Which?", "criteria": {" a": "", "b": 1}}},
            [("questions.q.criteria. a", "invalid_id"), ("questions.q.criteria.b", "invalid_type")],
        ),
        (
            {"q": {"type": "score", "instructions": "How?", "criteria": {"0": "low", "1": "high"}}},
            [("questions.q.criteria", "invalid_type")],
        ),
        (
            {"q": {"type": "score", "instructions": "How?", "criteria": ["low", None]}},
            [("questions.q.criteria[1]", "invalid_type")],
        ),
        ({"": {"type": "noul", "instructions": "Yes?"}}, [("questions.", "invalid_id")]),
    ],
)
async def test_every_invalid_question_is_a_400_naming_its_field(api, fake, questions, expected):
    error = google_error(await api.post(PATH, json=google_with(questions=questions)), 400)
    assert violations(error) == expected


async def test_a_choice_over_the_options_allowed_and_questions_over_the_limit_are_400s(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, max_answers=3, max_decisions_questions=2)
    options = {f"o{i}": "" for i in range(4)}
    choice = {"type": "choice", "instructions": "Which?", "criteria": options}
    error = google_error(await api.post(PATH, json=google_with(questions={"q": choice})), 400)
    assert violations(error) == [("questions.q.criteria", "too_long")]
    three = {f"q{i}": {"type": "noul", "instructions": "Yes?"} for i in range(3)}
    error = google_error(await api.post(PATH, json=google_with(questions=three)), 400)
    assert violations(error) == [("questions", "too_long")] and "Between 1 and 2 questions" in error["message"]


async def test_a_system_one_body_on_the_path_is_told_where_it_belongs(api, fake):
    error = google_error(await api.post(PATH, json=README_REQUEST), 400)
    assert violations(error) == [("state", "unknown_field"), ("input", "missing")]
    assert "POST /v1/systemone" in error["message"]


async def test_a_problem_only_the_core_finds_in_the_input_is_located_at_the_input(api, fake):
    """The core locates what it finds in the input at System One's `state`; Google's body calls it `input`."""
    evaluator_install(fake_evaluator(fake, max_input_tokens=64))
    error = google_error(await api.post(PATH, json=google_with(input="charged twice " * 2000)), 400)
    assert violations(error) == [("input", "token_limit")] and error["message"].startswith("input: the state is")
    assert fake.generate_calls == 0


def test_models_names_take_googles_prefix_or_none():
    assert parsed(google_with(model="models/jev-latest")).model == "models/jev-latest"
    assert parsed(google_with(model="jev-latest")).model == "jev-latest"
    assert parsed(google_with(model="models/jev-anything")).model == "models/jev-anything"  # any jev-* alias
    with pytest.raises(ModelUnknown):
        parsed(google_with(model="models/gemini-decision-1"))
    with pytest.raises(RequestInvalid) as raised:
        parsed(google_with(model="models/"))
    assert [p.type for p in raised.value.problems] == ["empty_model"]


async def test_a_body_that_is_not_json_with_googles_key_header_is_a_google_400(api, fake):
    response = await api.post(
        PATH, content=b'{"model": ', headers={"Content-Type": "application/json", "x-goog-api-key": "k"}
    )
    error = google_error(response, 400)
    assert error["message"].startswith("Invalid JSON payload received.")


# -- Google's answers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p_true", "noul"), [(0.999, 0.99), (0.004, 0.01), (0.5, 0.5), (0.3, 0.3)])
def test_a_noul_is_kept_within_googles_range_and_its_confidence_is_the_winning_sides(p_true, noul):
    question = question_build(id="q", type="noul", instructions="Yes?", criteria=None)
    answer = Answer(
        question=question,
        probabilities=(p_true, 1 - p_true),
        raw_probabilities=(p_true, 1 - p_true),
        label_mass=1.0,
        confidence=None,
        branches=(),
    )
    rendered = answer_render(answer=answer)
    assert rendered == {"type": "noul", "noul": noul, "confidence": max(noul, 1 - noul)}


# -- Errors before the body is read, auth, limits ----------------------------------------------------------------


async def test_errors_before_the_body_is_read_are_in_googles_shape_when_googles_key_header_is_sent(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY)
    google = google_error(await api.post(PATH, json=GOOGLE_REQUEST, headers={"x-goog-api-key": "sk-wrong"}), 401)
    assert google["details"][0]["reason"] == "API_KEY_INVALID" and google["message"] == "invalid API key"
    missing = await api.post(PATH, json=GOOGLE_REQUEST)  # no key at all: the path's primary shape, OpenAI's
    assert missing.status_code == 401 and missing.json()["error"]["type"] == "invalid_request_error"
    bearer = await api.post(PATH, json=GOOGLE_REQUEST, headers={"Authorization": "Bearer sk-wrong"})
    assert bearer.status_code == 401 and "type" in bearer.json()["error"]
    ok = await api.post(PATH, json=GOOGLE_REQUEST, headers={"x-goog-api-key": KEY})
    assert ok.status_code == 200, ok.text
    # The Bearer key wins where both are sent, as an `Authorization` header always does.
    both = await api.post(
        PATH, json=GOOGLE_REQUEST, headers={"x-goog-api-key": KEY, "Authorization": "Bearer sk-wrong"}
    )
    assert both.status_code == 401
    plain = await api.post(PATH, content=b"{}", headers={"x-goog-api-key": KEY, "Content-Type": "text/plain"})
    assert google_error(plain, 415)["status"] == "INVALID_ARGUMENT"
    too_large = await api.post(
        PATH,
        content=b" " * (settings.OPENJEV.max_body_bytes + 1),
        headers={"x-goog-api-key": KEY, "Content-Type": "application/json"},
    )
    assert google_error(too_large, 413)["status"] == "INVALID_ARGUMENT"


async def test_x_goog_api_key_is_the_key_on_every_route_a_bearer_key_is(api, fake, settings):
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY)
    for path, body in (("/v1/systemone", README_REQUEST), (PATH, GOOGLE_REQUEST)):
        assert (await api.post(path, json=body, headers={"x-goog-api-key": KEY})).status_code == 200
    assert (await api.get("/v1/limits", headers={"x-goog-api-key": KEY})).status_code == 200
    assert (await api.get("/v1/limits", headers={"x-goog-api-key": "nope"})).status_code == 401
    health = (await api.get("/health", headers={"x-goog-api-key": KEY})).json()
    assert "model" in health


async def test_wrong_keys_in_x_goog_api_key_are_throttled_as_wrong_bearer_keys_are(api, fake, settings, monkeypatch):
    monkeypatch.setattr(ratelimits_bad_keys, "_failed_recently", {})
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY, bad_keys_per_minute=2)
    wrong = [(await api.post(PATH, json=GOOGLE_REQUEST, headers={"x-goog-api-key": f"nope-{i}"})) for i in range(3)]
    assert [r.status_code for r in wrong] == [401, 401, 429]
    assert google_error(wrong[2], 429)["status"] == "RESOURCE_EXHAUSTED"


async def test_a_429_sends_a_short_retry_after_and_the_real_wait_in_retry_info(api, fake, settings, monkeypatch):
    """google-genai waits exactly what `Retry-After` says before each of its four retries: the header is cut to
    2 s, the real wait is the body's `RetryInfo`."""
    monkeypatch.setattr(ratelimits_store, "_loops", weakref.WeakKeyDictionary())
    settings.OPENJEV = replace(settings.OPENJEV, key_requests_per_minute=1)
    headers = {"x-goog-api-key": "any"}
    assert (await api.post(PATH, json=GOOGLE_REQUEST, headers=headers)).status_code == 200
    refused = await api.post(PATH, json=GOOGLE_REQUEST, headers=headers)
    error = google_error(refused, 429)
    (retry,) = [d["retryDelay"] for d in error["details"] if d["@type"].endswith("RetryInfo")]
    wait_ms = round(float(retry.removesuffix("s")) * 1000)
    assert 0 < wait_ms <= 60_000
    # The window is the clock's minute: in its last two seconds the real wait is under the cut.
    assert refused.headers["retry-after"] == str(min(2, math.ceil(wait_ms / 1000)))
    assert refused.headers["retry-after-ms"] == str(min(2000, wait_ms))
    assert refused.headers["x-ratelimit-limit-requests"] == "1"


# -- What the shared plumbing reports ------------------------------------------------------------------------------


async def test_the_limits_show_googles_block(api):
    limits = (await api.get("/v1/limits")).json()
    assert limits["google"] == {
        "max_questions": limits["decisions"]["max_questions"],
        "max_choices": limits["max_answers_per_question"],
        "max_levels": limits["max_answers_per_question"],
        "max_images": limits["max_images"],
    }


def test_calls_are_traced_as_googles_decision_system():
    assert (decision_system("google"), decision_system("decisions"), decision_system("systemone")) == (
        "google",
        "openai",
        "typesafe",
    )
    assert decision_system("stream") == "typesafe" and decision_system("classify") is None


def test_a_key_in_x_goog_api_key_never_reaches_a_log_line():
    line = log_line_redact(line=json.dumps({"x-goog-api-key": "sk-secret-1"}) + " x-goog-api-key: sk-secret-2")
    assert "sk-secret" not in line
