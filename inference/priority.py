"""The scheduling priority of the backend calls made in this context: batch jobs yield to interactive traffic.

SGLang schedules by a request's `priority` when it runs with `--enable-priority-scheduling` (a lower value is
served later there by default; the setting `OPENJEV_BATCH_PRIORITY` says which value batch lines send, and every
other call then sends `INTERACTIVE_PRIORITY`). Unset, no priority is sent and the backend schedules as it always
has. A context variable rather than a field of every request: the wire formats' services answer a batch line
exactly as they answer the same body sent directly, and only the batch worker knows it is one.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_priority: contextvars.ContextVar[int | None] = contextvars.ContextVar("openjev_backend_priority", default=None)


@contextmanager
def backend_priority_set(*, priority: int | None) -> Iterator[None]:
    """Backend calls made in this block (and the tasks it starts) carry `priority`."""
    token = _priority.set(priority)
    try:
        yield
    finally:
        _priority.reset(token)


def backend_priority_current() -> int | None:
    return _priority.get()


INTERACTIVE_PRIORITY = 0
"""What every other backend call sends once batch lines send a priority. SGLang, scheduling by priority, gives a
request without one the last place of all, in either order it schedules (`--schedule-low-priority-values-first`
or not): were only batch lines to send one, interactive requests would wait behind them, the very opposite."""
