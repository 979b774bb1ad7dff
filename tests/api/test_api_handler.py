"""The lean API handler: Django's request signals sent in place, on the event loop (no thread hop)."""

from __future__ import annotations

import threading

from django.core import signals

NON_BLOCKING_RECEIVERS = {
    "request_started": {"reset_queries", "close_old_connections"},
    "request_finished": {"close_old_connections", "close_caches", "reset_urlconf"},
}
"""Django's own receivers: each touches only connections and caches this thread opened, and the API
opens none on the event loop. A new receiver must be checked for blocking I/O before it joins."""


def test_the_request_signals_have_only_receivers_that_do_no_io_on_the_event_loop():
    for name, expected in NON_BLOCKING_RECEIVERS.items():
        signal = getattr(signals, name)
        receivers = {ref().__name__ for _, ref, *_ in signal.receivers if ref() is not None}
        assert receivers == expected, name


async def test_an_api_request_sends_both_signals_on_the_event_loop_thread(api):
    seen: list[tuple[str, str]] = []

    def started(**_: object) -> None:
        seen.append(("started", threading.current_thread().name))

    def finished(**_: object) -> None:
        seen.append(("finished", threading.current_thread().name))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        response = await api.get("/v1/limits")
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert response.status_code == 200
    here = threading.current_thread().name
    assert seen == [("started", here), ("finished", here)]
