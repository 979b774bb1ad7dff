"""Google's official `google-genai` (pinned, unchanged) against the real server on a socket and the SGLang
stand-in: sync and async `client.decisions.create` answer the README's questions with exactly System One's
probabilities; `models/` names; errors in Google's shape, raised as the SDK's own exception types and never retried
when retrying cannot help; what the SDK sends unchecked is refused by the server; the key as `x-goog-api-key`;
pydantic-ai's strict `google-decisions` reader takes the answers; the other formats of the path are untouched.

Every request is counted as it reached the server (`WireRecorder`), so a retry the SDK made is seen.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import _interactions as gerrors
from openai import OpenAI

from api.decisions.openapi_examples import DECISIONS_REQUEST
from api.google import errors as google_errors
from api.google.openapi import GOOGLE_REQUEST
from api.google.render import NOUL_MAX, NOUL_MIN
from tests.conftest import README_REQUEST

PATH = "/v1/decisions"
KEY = "sk-google-right"


def _client(url: str, *, key: str = "unused-while-auth-is-off") -> genai.Client:
    """The client as its documentation builds one for another endpoint: the base URL, nothing else."""
    return genai.Client(api_key=key, http_options={"base_url": url})


def _create(client: genai.Client, **changes: Any) -> Any:
    return client.decisions.create(**{**GOOGLE_REQUEST, **changes})


def _system_one(url: str) -> dict[str, Any]:
    response = httpx.post(f"{url}/v1/systemone", json=README_REQUEST, timeout=30)
    assert response.status_code == 200, response.text
    answers: dict[str, Any] = response.json()["answers"]
    return answers


def assert_system_ones_probabilities(decision: Any, systemone: dict[str, Any]) -> None:
    """Google's answers are System One's numbers, option by option, with Google's own `confidence` and clamp."""
    assert list(decision.answers) == list(systemone) == ["refund", "team", "anger"]
    refund, team, anger = (decision.answers[name] for name in ("refund", "team", "anger"))
    assert refund.type == "noul"
    assert refund.noul == min(max(systemone["refund"]["noul"], NOUL_MIN), NOUL_MAX)
    assert refund.confidence == max(refund.noul, 1 - refund.noul)
    assert team.type == "choice" and team.choice == systemone["team"]["choice"]
    assert list(team.probabilities.items()) == list(systemone["team"]["probabilities"].items())
    assert team.confidence == max(systemone["team"]["probabilities"].values())
    assert anger.type == "score" and anger.score == systemone["anger"]["score"]
    assert list(anger.probabilities.items()) == list(systemone["anger"]["probabilities"].items())
    assert anger.legend == systemone["anger"]["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert anger.confidence == max(systemone["anger"]["probabilities"].values())


def test_the_readme_request_is_system_ones_in_googles_shape():
    assert GOOGLE_REQUEST["input"] == README_REQUEST["state"]
    for qid, question in README_REQUEST["questions"].items():
        google = GOOGLE_REQUEST["questions"][qid]
        assert (google["type"], google["instructions"]) == (question["type"], question["instructions"])
        assert google.get("criteria") == question.get("criteria")


def test_the_sdk_answers_the_readme_questions_with_system_ones_probabilities(google_server, fake):
    server, recorder = google_server
    decision = _create(_client(server.url))
    assert_system_ones_probabilities(decision, _system_one(server.url))
    assert decision.usage.total_output_tokens == 4
    assert decision.usage.total_tokens == decision.usage.total_input_tokens + 4
    assert [(m.modality, m.tokens) for m in decision.usage.input_tokens_by_modality] == [
        ("text", decision.usage.total_input_tokens)
    ]
    (sent,) = recorder.to(PATH)
    assert sent.headers["x-goog-api-key"] == "unused-while-auth-is-off" and "authorization" not in sent.headers
    assert sent.headers["user-agent"].startswith("google-genai-sdk/3.6.1")


async def test_the_async_sdk_answers_them_the_same(google_server, fake):
    server, _ = google_server
    client = _client(server.url)  # held: the async client closes with it
    decision = await client.aio.decisions.create(**GOOGLE_REQUEST)
    assert_system_ones_probabilities(decision, _system_one(server.url))
    again = _create(_client(server.url))
    assert decision.answers == again.answers


def test_models_names_with_and_without_the_prefix_and_an_unknown_one(google_server, fake):
    server, recorder = google_server
    client = _client(server.url)
    prefixed, bare = _create(client, model="models/jev-latest"), _create(client, model="jev-latest")
    assert prefixed.answers == bare.answers
    assert getattr(prefixed, "model", None) == "models/jev-latest"  # kept by the SDK as an extra field
    recorder.requests.clear()
    with pytest.raises(gerrors.NotFoundError) as raised:
        _create(client, model="models/gemini-decision-1")
    assert raised.value.status_code == 404
    error = raised.value.body["error"]  # type: ignore[index]
    assert (error["code"], error["status"]) == (404, "NOT_FOUND")
    assert "models/gemini-decision-1" in error["message"] and "models/jev-latest" in error["message"]
    assert len(recorder.to(PATH)) == 1


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"questions": {}}, "questions"),
        ({"input": ""}, "input"),
        ({"input": [{"type": "text", "text": "   "}]}, "input"),
        (
            {"questions": {"team": {"type": "choice", "instructions": "Which?", "criteria": {"only": "The one"}}}},
            "questions.team.criteria",
        ),
        (
            {"questions": {"anger": {"type": "score", "instructions": "How?", "criteria": []}}},
            "questions.anger.criteria",
        ),
        (
            {"questions": {"anger": {"type": "score", "instructions": "How?", "criteria": ["Calm", ""]}}},
            "questions.anger.criteria[1]",
        ),
    ],
    ids=["no questions", "empty input", "blank text block", "one option", "no levels", "an empty level"],
)
def test_what_the_sdk_sends_unchecked_is_a_400_in_googles_shape_never_retried(google_server, fake, changes, field):
    """The SDK sends all of these as they are; the server refuses them, naming the field, and the SDK raises
    `BadRequestError` after one request (a 400 is not in its retried statuses)."""
    server, recorder = google_server
    with pytest.raises(gerrors.BadRequestError) as raised:
        _create(_client(server.url), **changes)
    assert raised.value.status_code == 400
    error = raised.value.body["error"]  # type: ignore[index]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    (violations,) = [d["fieldViolations"] for d in error["details"] if d["@type"].endswith("BadRequest")]
    assert [v["field"] for v in violations] == [field]
    assert error["message"].startswith(f"{field}: ")
    assert [r.status for r in recorder.to(PATH)] == [400]
    assert fake.generate_calls == 0


def test_the_key_is_taken_from_x_goog_api_key_and_a_wrong_one_is_a_401_in_googles_shape(google_server, fake, settings):
    """A wrong key is a 401 `UNAUTHENTICATED` (`API_KEY_INVALID` as Gemini names it), which the SDK raises as
    `AuthenticationError` without a retry: the status every route of this service answers a wrong key with, where
    Gemini's own 400 would read to the SDK as a malformed request."""
    server, recorder = google_server
    settings.OPENJEV = replace(settings.OPENJEV, api_key=KEY)
    decision = _create(_client(server.url, key=KEY))
    assert set(decision.answers) == {"refund", "team", "anger"}
    with pytest.raises(gerrors.AuthenticationError) as raised:
        _create(_client(server.url, key="sk-wrong"))
    assert raised.value.status_code == 401
    error = raised.value.body["error"]  # type: ignore[index]
    assert (error["code"], error["status"], error["message"]) == (401, "UNAUTHENTICATED", "invalid API key")
    assert error["details"][0]["reason"] == "API_KEY_INVALID"
    assert [r.status for r in recorder.to(PATH)] == [200, 401]


def test_a_dead_backend_is_retried_as_the_sdk_does_after_a_retry_after_cut_short(google_server, fake, monkeypatch):
    """google-genai retries a 503 four times, waiting what `Retry-After` says however long: the server's 5 s
    (here 30 s) goes out cut to `RETRY_AFTER_MAX_SECONDS` (1 s here, to keep the test short), and the full wait is
    in the body's `RetryInfo`."""
    from api.plumbing import error_responses

    server, recorder = google_server
    monkeypatch.setitem(error_responses.RETRY_AFTER, 503, "30")
    monkeypatch.setattr(google_errors, "RETRY_AFTER_MAX_SECONDS", 1)
    fake.dead()
    started = time.monotonic()
    with pytest.raises(gerrors.InternalServerError) as raised:
        _create(_client(server.url))
    assert time.monotonic() - started < 10
    assert raised.value.status_code == 503 and raised.value.response.headers["retry-after"] == "1"
    error = raised.value.body["error"]  # type: ignore[index]
    assert error["status"] == "UNAVAILABLE"
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"} in error["details"]
    sent = recorder.to(PATH)
    assert [r.status for r in sent] == [503] * 5
    fake.revive()


def test_pydantic_ais_strict_google_decisions_reader_takes_the_answers(google_server, fake):
    """pydantic-ai 2.68's `google-decisions` model posts its own JSON through the SDK's API client (question ids
    `q0`, `q1`, ...) and checks every answer strictly: the keys, the ranges, a noul in [0, 1], probabilities that
    sum to 1 within 1e-6, a score within its levels' bounds."""
    import asyncio

    from pydantic_ai.models.decision import ChoiceQuestion, DecisionRequest, NoulQuestion, ScoreQuestion
    from pydantic_ai.models.google_decisions import GoogleDecisionsModel
    from pydantic_ai.providers.google import GoogleProvider

    server, recorder = google_server
    provider = GoogleProvider(api_key="unused-while-auth-is-off", base_url=server.url)
    model = GoogleDecisionsModel("models/jev-latest", provider=provider)
    questions = README_REQUEST["questions"]
    request = DecisionRequest(
        state=README_REQUEST["state"],
        questions={
            "refund": NoulQuestion(instructions=questions["refund"]["instructions"]),
            "team": ChoiceQuestion(
                instructions=questions["team"]["instructions"], criteria=dict(questions["team"]["criteria"])
            ),
            "anger": ScoreQuestion(
                instructions=questions["anger"]["instructions"], criteria=list(questions["anger"]["criteria"])
            ),
        },
    )
    response = asyncio.run(model.decide(request, {}))
    systemone = _system_one(server.url)
    assert response.answers["refund"].noul == min(max(systemone["refund"]["noul"], NOUL_MIN), NOUL_MAX)  # type: ignore[union-attr]
    team, anger = response.answers["team"], response.answers["anger"]
    assert team.probabilities == systemone["team"]["probabilities"]  # type: ignore[union-attr]
    assert list(anger.probabilities.values()) == list(systemone["anger"]["probabilities"].values())  # type: ignore[union-attr]
    assert response.usage.input_tokens > 0 and response.usage.output_tokens == 4
    (sent,) = recorder.to(PATH)
    assert "pydantic-ai" in sent.headers["user-agent"] and sent.headers["x-goog-api-key"]


def test_an_openai_body_and_a_system_one_body_are_still_served_by_their_own_formats(google_server, fake):
    server, recorder = google_server
    openai = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0).decisions.create(**DECISIONS_REQUEST)
    google = _create(_client(server.url))
    systemone = _system_one(server.url)
    assert [a.type for a in openai.answers] == ["predicate", "choice", "score"]
    assert openai.answers[0].probability == systemone["refund"]["noul"]  # type: ignore[union-attr]
    assert_system_ones_probabilities(google, systemone)
    # An OpenAI body that carries Google's key header is still OpenAI's: the body decides.
    sent = httpx.post(f"{server.url}{PATH}", json=DECISIONS_REQUEST, headers={"x-goog-api-key": "k"}, timeout=30).json()
    assert [a["type"] for a in sent["answers"]] == ["predicate", "choice", "score"]
    assert [r.status for r in recorder.requests] == [200, 200, 200, 200]
