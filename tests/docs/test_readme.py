"""The README is what a newcomer reads first: the two commands at the top, one screenful (under 12 KB), and one
example per wire format that runs as written. Each example is sent to the app on loopback (the SGLang stand-in
behind it) and answers the README's questions with System One's answers, in the shape the README shows."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from django.urls import URLPattern, URLResolver

from api.classify import registry
from serving.config import BASE_DIR
from testbed.live_server import LiveServer
from tests.classify.conftest import SENTIMENT, spec_of
from tests.conftest import README_REQUEST

README = BASE_DIR / "README.md"
DOCUMENTED_URL = "http://127.0.0.1:8000"
"""Where the examples expect `make serve`; the tests send them to the live server instead."""


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _text(), re.S)


def _curl(path: str) -> tuple[str, dict[str, Any]]:
    """The README's curl example for `path`: the path it posts to and its body, as the shell would pass them."""
    (command,) = [block for block in _blocks("bash") if f"{DOCUMENTED_URL}{path} " in block]
    args = shlex.split(command)
    assert args[0] == "curl", command
    url = next(arg for arg in args if arg.startswith(DOCUMENTED_URL))
    body: dict[str, Any] = json.loads(args[args.index("-d") + 1])
    return urlsplit(url).path, body


def _python(module: str) -> str:
    (code,) = [block for block in _blocks("python") if re.search(rf"^from {module} import", block, re.M)]
    return code


def _run(code: str, url: str) -> dict[str, Any]:
    assert DOCUMENTED_URL in code
    namespace: dict[str, Any] = {}
    exec(compile(code.replace(DOCUMENTED_URL, url), str(README), "exec"), namespace)  # the example, verbatim
    return namespace


def test_the_readme_opens_with_the_two_commands_and_stays_under_12_kb() -> None:
    text = _text()
    assert len(text.encode("utf-8")) < 12 * 1024, f"README.md is {len(text.encode('utf-8'))} bytes"
    first_block = text.index("```")
    assert "\n## " not in text[:first_block], "a section comes before the two commands"
    commands = [line.split("#")[0].strip() for line in _blocks("bash")[0].splitlines()]
    assert commands == ["make serve", "make test"]
    makefile = (BASE_DIR / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^serve:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def _routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> list[str]:
    """The paths the URLconf serves, a parameter written `{id}`; a resolver included at the root is walked."""
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver) and not route:
            found += _routes(pattern.url_patterns, route)
        else:
            found.append("/" + re.sub(r"<(?:\w+:)?\w+>", "{id}", route))
    return found


def test_the_readme_lists_every_route_the_site_serves() -> None:
    from openjev_site.urls import urlpatterns

    routes = [route for route in _routes(urlpatterns) if not route.startswith("/static/")]
    assert {"/v1/systemone", "/v1/files/{id}/content", "/v1/batches/{id}/cancel", "/admin/"} <= set(routes)
    text = _text()
    missing = [route for route in routes if not re.search(rf"`(?:[A-Z]+ )?{re.escape(route)}`", text)]
    assert not missing, f"README.md's routes table does not list {missing}"


def test_the_system_one_example_is_the_documented_request_answered_in_the_shape_shown(asgi_server: LiveServer) -> None:
    path, body = _curl("/v1/systemone")
    # The same request as the API reference's named example, its apostrophe spelt out for the shell's quotes.
    assert {**body, "state": body["state"].replace("has not", "hasn't")} == README_REQUEST
    response = httpx.post(asgi_server.url + path, json=body, timeout=30)
    assert response.status_code == 200, response.text
    (shown,) = [json.loads(block) for block in _blocks("json") if '"answers"' in block]
    answered = response.json()
    assert set(answered) == set(shown) and set(answered["usage"]) == set(shown["usage"])
    for qid, answer in shown["answers"].items():
        assert set(answered["answers"][qid]) == set(answer), qid
        assert answered["answers"][qid]["type"] == answer["type"]


def _system_one(url: str) -> dict[str, Any]:
    _, body = _curl("/v1/systemone")
    response = httpx.post(url + "/v1/systemone", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answers: dict[str, Any] = response.json()["answers"]
    return answers


def test_the_openai_example_runs_as_written_with_system_ones_answers(
    asgi_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = _run(_python("openai"), asgi_server.url)["decision"]
    systemone = _system_one(asgi_server.url)
    assert [answer.name for answer in decision.answers] == list(systemone)
    assert decision.answers[1].choice == systemone["team"]["choice"]
    assert decision.answers[2].score == systemone["anger"]["score"]
    assert capsys.readouterr().out == f"['predicate', 'choice', 'score'] {systemone['team']['choice']}\n"


def test_the_google_example_runs_as_written_with_system_ones_answers(
    asgi_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    decision = _run(_python("google"), asgi_server.url)["decision"]
    systemone = _system_one(asgi_server.url)
    assert list(decision.answers) == list(systemone)
    assert decision.answers["team"].choice == systemone["team"]["choice"]
    refund = decision.answers["refund"].noul
    assert capsys.readouterr().out == f"{refund} {systemone['team']['choice']}\n"


def test_the_classify_example_is_answered_for_the_classifier_it_names(
    asgi_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, body = _curl("/v1/classify")
    assert body["model"] == SENTIMENT.name
    assert "`, `".join(name for name, _ in SENTIMENT.labels) in _text(), "the README names the labels in order"
    monkeypatch.setattr(registry, "_classifiers_fetch", lambda: {SENTIMENT.name: spec_of(SENTIMENT)})
    registry.classifier_cache_forget()
    response = httpx.post(asgi_server.url + path, json=body, timeout=30)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert [item["index"] for item in data] == list(range(len(body["input"])))
    for item in data:
        assert set(item) == {"index", "label", "probs", "num_classes"} and item["num_classes"] == 3
        assert item["label"] in {name for name, _ in SENTIMENT.labels}
