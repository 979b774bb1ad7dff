"""What OpenAI's Decisions API refuses, refused here the same way: two questions with one `name` (feedback by name
would be ambiguous) and an empty `input`; and a body of the other wire format sent to the wrong route gets a 400
that names the right one, on both routes."""

from __future__ import annotations

from tests.conftest import README_REQUEST
from tests.decisions.helpers import PATH, assert_openai_error, decision_with, question_with


async def test_two_questions_with_the_same_name_are_refused(api, fake):
    response = await api.post(
        PATH, json=decision_with(questions=[question_with(name="team"), question_with(name="team")])
    )
    assert_openai_error(response, 400, code="duplicate_value", param="questions[1].name")
    assert fake.requests == []


async def test_unnamed_questions_and_distinct_names_are_still_answered(api, fake):
    response = await api.post(
        PATH, json=decision_with(questions=[question_with(), question_with(), question_with(name="a")])
    )
    assert response.status_code == 200, response.text


async def test_an_empty_or_blank_input_is_refused(api, fake):
    for text in ("", "   \n"):
        response = await api.post(PATH, json=decision_with(input=text))
        assert_openai_error(response, 400, code="empty_string", param="input")
    assert fake.requests == []


async def test_a_system_one_body_on_the_decisions_route_is_told_its_route(api, fake, settings):
    response = await api.post(PATH, json=README_REQUEST)
    assert response.status_code == 400, response.text
    assert "/v1/systemone" in response.text
    assert fake.requests == []


async def test_a_system_one_body_is_told_its_route_by_openais_parser_too(fake):
    """Without another format on the path (Google's claims a map of questions), OpenAI's parser says it itself."""
    from api.checking.limits import limits_configured
    from api.decisions.parsing import decisions_request_parse
    from inference.errors import RequestInvalid

    try:
        decisions_request_parse(data=README_REQUEST, limits=limits_configured(), models=frozenset({"jev-latest"}))
    except RequestInvalid as exc:
        [problem] = exc.problems
        assert problem.type == "wrong_route" and "/v1/systemone" in problem.msg
    else:
        raise AssertionError("a System One body was accepted as a Decisions request")


async def test_a_decisions_body_on_the_system_one_route_is_told_its_route(api, fake):
    response = await api.post("/v1/systemone", json=decision_with())
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert detail["error_type"] == "wrong_route" and "/v1/decisions" in detail["message"]
    assert fake.requests == []
