"""Log lines a client shapes (its request line, its headers) are redacted and cut in time linear in the line:
the access log runs on the event loop, and the review's path of 8,100 slashes blocked it for a second per
WebSocket upgrade."""

from __future__ import annotations

from inference.redaction import backend_text_redact, url_credentials_redact
from serving.access_log import LINE_MAX_CHARACTERS, log_line_redact
from serving.redaction import text_redact
from tests.linear import assert_linear


def test_a_path_of_slashes_costs_the_access_log_linear_time():
    assert_linear(lambda n: lambda: log_line_redact(line=f'"WebSocket /{"/" * n}" [accepted]'), size=1_000)


def test_a_path_of_slashes_and_question_marks_costs_linear_time():
    assert_linear(lambda n: lambda: log_line_redact(line="GET " + "/?" * n + " HTTP/1.1"), size=1_000)


def test_repeated_credential_words_cost_linear_time():
    assert_linear(lambda n: lambda: log_line_redact(line="Authorization: " + "Bearer " * n), size=1_000)
    assert_linear(lambda n: lambda: log_line_redact(line="authorization" + " " * n + "x"), size=1_000)


def test_a_long_scheme_like_word_costs_url_redaction_linear_time():
    assert_linear(lambda n: lambda: url_credentials_redact(text="a." * n + "://"), size=1_000)
    assert_linear(lambda n: lambda: url_credentials_redact(text="a." * n), size=1_000)
    assert_linear(lambda n: lambda: url_credentials_redact(text="x://" + "a" * n), size=1_000)


def test_data_urls_cost_backend_redaction_linear_time():
    assert_linear(lambda n: lambda: backend_text_redact(text="data:" + "a;" * n), size=1_000)
    assert_linear(lambda n: lambda: backend_text_redact(text="data:a" * n), size=1_000)


def test_the_formatter_redaction_costs_linear_time_with_secrets_configured():
    secrets = ["a" * 10, "b" * 40]
    assert_linear(lambda n: lambda: text_redact(text="ab:/" * n, secrets=secrets), size=1_000)


def test_url_credentials_are_still_redacted_wherever_the_url_stands():
    assert url_credentials_redact(text="go http://user:p@ss@host:1/x now") == "go http://***@host:1/x now"
    assert url_credentials_redact(text="redis+tls://u:p@r/0") == "redis+tls://***@r/0"
    assert url_credentials_redact(text="a://b://u:p@h/") == "a://b://***@h/"
    assert url_credentials_redact(text="no url: a@b, ://x@y") == "no url: a@b, ://x@y"


def test_a_long_line_is_cut_after_redaction_with_the_count_of_what_was_cut():
    secret_url = "http://user:secret@host/"
    line = "x" * (LINE_MAX_CHARACTERS - 10) + secret_url + "y" * 5_000
    logged = log_line_redact(line=line)
    assert "secret" not in logged and "user" not in logged
    assert logged.startswith("x" * (LINE_MAX_CHARACTERS - 10) + "http://***")
    assert logged.endswith(" more characters not logged)")
    assert len(logged) < LINE_MAX_CHARACTERS + 60
