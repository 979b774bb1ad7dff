"""The state as the body sends it, parsed once into the conversation the core reads."""

from __future__ import annotations

from typing import Any

import pytest

from evaluations.errors import problems_render
from evaluations.parsing import Limits, systemone_request_parse
from inference.errors import RequestInvalid

QUESTIONS = {"q": {"type": "noul"}}


def conversation_of(state: Any) -> list[dict[str, Any]]:
    """The parsed state's messages, as the chat template reads them."""
    parsed = systemone_request_parse(data={"model": "jev-latest", "state": state, "questions": QUESTIONS},
                                     limits=Limits(64, 255), models=frozenset({"jev-latest"}))
    return [message.chat() for message in parsed.evaluation.conversation]


def test_structured_state_becomes_compact_json_with_metadata_and_unicode_kept():
    messages = conversation_of({"messages": [{"role": "user", "content": "hi"}], "ticket": "Ünïcode"})
    assert messages == [{"role": "user", "content": '{"messages":[{"role":"user","content":"hi"}],"ticket":"Ünïcode"}'}]


def test_chat_transcript_keeps_messages_and_extra_keys():
    transcript = [{"role": "user", "content": "a", "name": "x"}, {"role": "assistant", "content": "b"}]
    assert conversation_of({"messages": transcript}) == transcript
    assert conversation_of(transcript) == transcript


@pytest.mark.parametrize("message, loc_tail", [
    ({"role": "wizard", "content": "x"}, "role"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:"}}]}, 0),
    ({"role": "user", "content": 5}, "content"),
])
def test_bad_roles_and_non_text_content_are_rejected(message: dict[str, Any], loc_tail: str | int) -> None:
    with pytest.raises(RequestInvalid) as err:
        conversation_of([message])
    (problem,) = problems_render(err.value.problems)
    assert problem["loc"][:2] == ["body", "state"]
    assert problem["loc"][-1] == loc_tail
