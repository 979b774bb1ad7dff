"""Property-based check of `/openapi.json` against the app (fake SGLang backend): schemathesis generates
requests from the document, valid and invalid, and every response must be documented and no 5xx.

Bounded for a 2-core CI: at most 40 generated requests per operation (plus the documented examples). The Files and
Batches routes store what they are sent, so theirs run on the test database.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from inference.runner import Evaluator
from openjev_site.asgi import application

MAX_EXAMPLES = 40
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# Loaded at collection from the app itself (the document needs no engine). `schemathesis.pytest.from_fixture`
# would be the natural way, but it writes `Function._nodeid`, which pytest 9 no longer has.
schema = schemathesis.openapi.from_asgi("/openapi.json", application)
STORED_ROUTES = r"^/v1/(files|batches)"
"""OpenAI's Files and Batches routes: what they answer is stored, so their requests run on the test database."""

GENERATION = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@schema.exclude(path_regex=STORED_ROUTES).parametrize()
@GENERATION
def test_generated_requests_get_documented_responses_and_never_a_5xx(case: Any, evaluator: Evaluator) -> None:
    case.call_and_validate(checks=CHECKS)


@schema.include(path_regex=STORED_ROUTES).parametrize()
@pytest.mark.django_db(transaction=True)
@GENERATION
def test_generated_requests_to_files_and_batches_get_documented_responses_and_never_a_5xx(
    case: Any, evaluator: Evaluator
) -> None:
    case.call_and_validate(checks=CHECKS)
