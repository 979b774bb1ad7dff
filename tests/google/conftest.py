"""Fixtures of the Google Decisions tests: the real application on a socket, every request recorded as it arrived
(so a test counts what an SDK really sent, retries included)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inference.runner import Evaluator
from tests.docs.conftest import AppServer, WireRecorder


@pytest.fixture
def google_server(evaluator: Evaluator) -> Iterator[tuple[AppServer, WireRecorder]]:
    from openjev_site.asgi import application

    recorder = WireRecorder(application)
    with AppServer(recorder) as server:
        yield server, recorder
