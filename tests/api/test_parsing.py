"""The state as the body sends it, parsed once into the conversation the core reads."""

from __future__ import annotations

from typing import Any

import pytest

from api.checking.limits import Limits
from api.plumbing.api_error import problems_render
from api.systemone.parsing import systemone_request_parse
from inference.errors import RequestInvalid

QUESTIONS = {"q": {"type": "noul"}}


def conversation_of(state: Any) -> list[dict[str, Any]]:
    """The parsed state's messages, as the chat template reads them."""
    parsed = systemone_request_parse(
        data={"model": "jev-latest", "state": state, "questions": QUESTIONS},
        limits=Limits(64, 255),
        models=frozenset({"jev-latest"}),
    )
    return [message.chat() for message in parsed.evaluation.conversation]


def test_structured_state_becomes_compact_json_with_metadata_and_unicode_kept():
    messages = conversation_of({"messages": [{"role": "user", "content": "hi"}], "ticket": "Ünïcode"})
    assert messages == [{"role": "user", "content": '{"messages":[{"role":"user","content":"hi"}],"ticket":"Ünïcode"}'}]


def test_chat_transcript_keeps_messages_and_extra_keys():
    transcript = [{"role": "user", "content": "a", "name": "x"}, {"role": "assistant", "content": "b"}]
    assert conversation_of({"messages": transcript}) == transcript
    assert conversation_of(transcript) == transcript


@pytest.mark.parametrize(
    "message, loc_tail",
    [
        ({"role": "wizard", "content": "x"}, "role"),
        ({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}, 0),
        ({"role": "user", "content": 5}, "content"),
    ],
)
def test_bad_roles_and_non_text_content_are_rejected(message: dict[str, Any], loc_tail: str | int) -> None:
    with pytest.raises(RequestInvalid) as err:
        conversation_of([message])
    (problem,) = problems_render(err.value.problems)
    assert problem["loc"][:2] == ["body", "state"]
    assert problem["loc"][-1] == loc_tail


def questions_parse(questions: dict[str, Any], *, max_answers: int = 255) -> tuple[Any, ...]:
    parsed = systemone_request_parse(
        data={"model": "jev-latest", "state": "s", "questions": questions},
        limits=Limits(64, max_answers),
        models=frozenset({"jev-latest"}),
    )
    return parsed.evaluation.questions


def test_a_question_sent_again_is_parsed_once_and_any_change_is_parsed_anew():
    """Valid questions are cached by id and JSON: the same question again is the same object, while
    another id, another description or another order of options is a question of its own."""
    team = {"type": "choice", "instructions": "Team?", "criteria": {"Billing": None, "Tech": "Bugs"}}
    (first,) = questions_parse({"team": team})
    (again,) = questions_parse({"team": dict(team)})
    assert again is first
    (renamed,) = questions_parse({"group": team})
    assert renamed.id == "group"
    (reordered,) = questions_parse({"team": {**team, "criteria": {"Tech": "Bugs", "Billing": None}}})
    assert [o.key for o in reordered.options] == ["Tech", "Billing"]
    (described,) = questions_parse({"team": {**team, "criteria": {"Billing": "Payments", "Tech": "Bugs"}}})
    assert described.options[0].text == "Payments"


def test_a_cached_question_is_checked_again_under_other_limits_and_invalid_ones_every_time():
    three = {"type": "choice", "criteria": {"a": None, "b": None, "c": None}}
    assert len(questions_parse({"q": three})[0].options) == 3
    with pytest.raises(RequestInvalid) as err:
        questions_parse({"q": three}, max_answers=2)
    assert err.value.problems[0].type == "too_long"
    for _ in range(2):
        with pytest.raises(RequestInvalid):
            questions_parse({"q": {"type": "choice", "criteria": {"only": None}}})


def test_a_null_and_a_non_finite_number_never_share_a_cached_question():
    """orjson writes NaN as null; the body check refuses NaN before questions are parsed, whichever
    of the two was seen first."""
    with_null = {"type": "noul", "instructions": {"limit": None}}
    with_nan = {"type": "noul", "instructions": {"limit": float("nan")}}
    for first, second in ((with_null, with_nan), (with_nan, with_null)):
        for question in (first, second):
            if question is with_nan:
                with pytest.raises(RequestInvalid):
                    questions_parse({"q": question})
            else:
                assert questions_parse({"q": question})[0].instructions == '{"limit":null}'
