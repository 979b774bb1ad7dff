"""Django's `DATABASES` for `OPENJEV_DATABASE_URL`, with every wait on the database bounded by
`OPENJEV_DATABASE_TIMEOUT`.

SQLite: WAL lets readers (the admin) run beside the writer; `IMMEDIATE` transactions and the busy timeout make
concurrent writers wait their turn, for at most the timeout, instead of failing at once with "database is locked".

PostgreSQL: connecting is bounded (libpq's `connect_timeout`: a third of the timeout, at least 2 s, libpq's
least), and so is a server that stops answering on an open connection (TCP keepalives, and
`tcp_user_timeout` for data it never acknowledges). Statements are bounded only where the service itself waits
(`statement_timeout` on its background threads' connections: `audit.database`), so a migration or an admin report
may run as long as it needs. The request path never waits on any of this: it reads caches and writes a spool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dj_database_url

KEEPALIVE = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}
"""A peer gone without a word (a host powered off, a network cut) is noticed within about 11 s of silence."""


def connect_timeout_seconds(*, timeout: float) -> int:
    """libpq's `connect_timeout` for `OPENJEV_DATABASE_TIMEOUT` (whole seconds; libpq takes less than 2 as 2)."""
    return max(2, round(timeout / 3))


def databases_config(*, url: str, timeout: float) -> dict[str, Any]:
    """`DATABASES` for the URL. On SQLite the test database is a file too (`test-` and the database's file name,
    beside it), so tests see WAL as production does."""
    default: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=0))
    engine = default["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        default["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": timeout,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        if default["NAME"] not in ("", ":memory:"):
            name = Path(default["NAME"])
            default["TEST"] = {"NAME": str(name.with_name(f"test-{name.name}"))}
    elif engine == "django.db.backends.postgresql":
        default["OPTIONS"] = {
            "connect_timeout": connect_timeout_seconds(timeout=timeout),
            **KEEPALIVE,
            "tcp_user_timeout": round(timeout * 1000),
            **default.get("OPTIONS", {}),
        }
    return {"default": default}
