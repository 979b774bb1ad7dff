"""Whose fault a chat template failure is: the transcript's (the client's 422) when the template renders
a plain one-message chat, the template's (a startup error, 500) when it cannot even do that."""

from __future__ import annotations

import pytest

from inference.chat_template import ChatTemplate
from inference.errors import RequestInvalid, StartupError

STRICT = (
    "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
    "{{ raise_exception('System message must be at the beginning.') }}{% endif %}"
    "<{{ m.role }}>{{ m.content }}{% for call in m.tool_calls or [] %}{{ call.function.name | tojson }}"
    "{% endfor %}{% endfor %}"
)


def test_a_plain_chat_renders():
    assert ChatTemplate(STRICT).render([{"role": "user", "content": "hi"}]) == "<user>hi"


@pytest.mark.parametrize(
    "messages, reason",
    [
        ([{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}], "System message must be at"),
        ([{"role": "assistant", "content": "", "tool_calls": [1]}], "has no attribute 'function'"),
        ([{"role": "assistant", "content": "", "tool_calls": 5}], "not iterable"),
    ],
)
def test_a_transcript_the_template_refuses_is_a_request_problem_at_the_state(messages, reason):
    with pytest.raises(RequestInvalid) as raised:
        ChatTemplate(STRICT).render(messages)
    (problem,) = raised.value.problems
    assert problem.loc == ("state",) and problem.type == "chat_template" and reason in problem.msg


def test_a_template_that_cannot_render_any_chat_is_a_startup_error_not_the_clients():
    broken = ChatTemplate("{{ undefined_fn() }}")
    with pytest.raises(StartupError, match="one-message chat"):
        broken.render([{"role": "user", "content": "hi"}])


def test_a_template_that_does_not_compile_is_a_startup_error():
    with pytest.raises(StartupError, match="does not compile"):
        ChatTemplate("{% for %}").render([{"role": "user", "content": "hi"}])
