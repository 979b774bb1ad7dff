"""The storage load check: evaluations at a concurrency above the admission limit, with storage on.

Every response must be 200 or 529 and the stored rows must match the responses one for one (same
count, same statuses, every answered request id present: nothing lost, nothing duplicated); it also
measures what storage costs per evaluation: p50 latency with storage off and on (serially, where the
difference is the per-evaluation overhead, and under load) and the writer thread's CPU per row.
`bench/load_storage.py` runs it at length and prints the figures; `tests/storage/test_load.py` runs a
short form in CI.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from serving.config import StoreLevel
from testbed.load import requests_send


@dataclass(frozen=True)
class Phase:
    """One batch of requests: what came back, and what the database holds for it."""

    level: StoreLevel
    evaluations: int
    concurrency: int
    responses: Counter[int]
    stored: Counter[int]
    missing: list[str]
    duplicates: int
    latencies_ms: list[float]
    seconds: float
    writer_cpu_ms: float
    failed: int
    dropped: int

    @property
    def p50_ms(self) -> float | None:
        return statistics.median(self.latencies_ms) if self.latencies_ms else None

    @property
    def writer_cpu_ms_per_row(self) -> float | None:
        rows = sum(self.stored.values())
        return self.writer_cpu_ms / rows if rows else None

    def problems(self) -> list[str]:
        """Everything that breaks the load test's promise; empty when it holds."""
        found = []
        unexpected = {s: n for s, n in self.responses.items() if s not in (200, 529)}
        if unexpected:
            found.append(f"responses other than 200/529: {unexpected}")
        if sum(self.responses.values()) != self.evaluations:
            found.append(f"{self.evaluations} requests sent, {sum(self.responses.values())} answered")
        if self.level != "off":
            if self.stored != self.responses:
                found.append(f"stored statuses {dict(self.stored)} != responses {dict(self.responses)}")
            if self.missing:
                found.append(f"{len(self.missing)} answered request ids not stored, e.g. {self.missing[:3]}")
            if self.duplicates:
                found.append(f"{self.duplicates} duplicated request ids")
            if self.failed or self.dropped:
                found.append(f"storage failed {self.failed} and dropped {self.dropped} evaluations")
        elif sum(self.stored.values()):
            found.append(f"storage off, yet {sum(self.stored.values())} rows were stored")
        return found


@contextmanager
def store_level(*, level: StoreLevel) -> Iterator[None]:
    from django.conf import settings
    from django.test import override_settings

    with override_settings(OPENJEV=replace(settings.OPENJEV, store_evaluations=level)):
        yield


def _rows_since(first_id: int) -> tuple[Counter[int], set[str], int]:
    from django.db.models import Count

    from audit.models import Evaluation

    rows = Evaluation.objects.filter(id__gt=first_id)
    statuses = Counter(dict(rows.values_list("status_code").annotate(n=Count("id")).values_list("status_code", "n")))
    ids = set(rows.values_list("request_id", flat=True))
    duplicates = rows.count() - len(ids)
    return statuses, ids, duplicates


def _last_id() -> int:
    from audit.models import Evaluation

    last = Evaluation.objects.order_by("-id").values_list("id", flat=True).first()
    return int(last or 0)


def phase_run(
    *, url: str, level: StoreLevel, evaluations: int, concurrency: int, body: dict[str, Any] | None = None
) -> Phase:
    """Send `evaluations` requests at `concurrency` with storage at `level`; compare rows to responses."""
    from api.systemone.examples import README_REQUEST
    from audit.storage.store import storage_stats
    from audit.storage.writer import writer_drain

    first_id = _last_id()
    before = storage_stats()
    with store_level(level=level):
        start = time.perf_counter()
        results = asyncio.run(
            requests_send(url=url, body=body or README_REQUEST, count=evaluations, concurrency=concurrency)
        )
        seconds = time.perf_counter() - start
        if not writer_drain(timeout=120):
            raise RuntimeError("the storage writer did not drain within 120 s")
    after = storage_stats()
    stored, ids, duplicates = _rows_since(first_id)
    answered = [rid for status, rid, _ in results if status == 200 and rid]
    return Phase(
        level=level,
        evaluations=evaluations,
        concurrency=concurrency,
        responses=Counter(status for status, _, _ in results),
        stored=stored,
        missing=[rid for rid in answered if rid not in ids],
        duplicates=duplicates,
        latencies_ms=[ms for status, _, ms in results if status == 200],
        seconds=seconds,
        writer_cpu_ms=(after["writer_cpu_s"] - before["writer_cpu_s"]) * 1000.0,
        failed=int(after["failed"] - before["failed"]),
        dropped=int(after["dropped"] - before["dropped"]),
    )


@dataclass(frozen=True)
class LoadReport:
    load: Phase
    load_off: Phase
    serial_off: Phase
    serial_full: Phase

    @property
    def overhead_p50_ms(self) -> float | None:
        """Serial p50 with storage minus without: what one evaluation pays for being stored."""
        on, off = self.serial_full.p50_ms, self.serial_off.p50_ms
        return None if on is None or off is None else on - off

    def lines(self) -> list[str]:
        def fmt(value: float | None, unit: str = "ms") -> str:
            return "—" if value is None else f"{value:.2f} {unit}"

        load = self.load
        return [
            f"load: {load.evaluations} evaluations at concurrency {load.concurrency}, storage {load.level}: "
            f"{dict(sorted(load.responses.items()))} in {load.seconds:.2f} s; "
            f"stored {dict(sorted(load.stored.items()))}, missing {len(load.missing)}, duplicates {load.duplicates}",
            f"p50 latency under load (200s): storage off {fmt(self.load_off.p50_ms)}, full {fmt(load.p50_ms)}",
            f"p50 latency serial ({self.serial_full.evaluations} evaluations): storage off "
            f"{fmt(self.serial_off.p50_ms)}, full {fmt(self.serial_full.p50_ms)} -> overhead "
            f"{fmt(self.overhead_p50_ms)} per evaluation",
            f"writer thread CPU: {fmt(self.serial_full.writer_cpu_ms_per_row)} per stored evaluation (serial), "
            f"{fmt(load.writer_cpu_ms_per_row)} under load",
        ]


def storage_load_check(
    *,
    url: str,
    fake: Any,
    evaluations: int = 200,
    concurrency: int = 32,
    serial: int = 100,
    delay: float = 0.005,
    level: StoreLevel = "full",
) -> LoadReport:
    """The whole load test against a running server (`url`) whose evaluator talks to `fake`.

    Under load the fake answers each backend call after `delay` seconds, so evaluations overlap and
    `concurrency` above the admission limit really produces 529s; the serial phases use no delay.
    """
    fake.delay = delay
    try:
        phase_run(url=url, level="off", evaluations=min(20, evaluations), concurrency=4)  # warm pools and caches
        load_off = phase_run(url=url, level="off", evaluations=evaluations, concurrency=concurrency)
        load = phase_run(url=url, level=level, evaluations=evaluations, concurrency=concurrency)
    finally:
        fake.delay = 0.0
    rounds = max(1, min(4, serial // 10))  # alternate off/on so drift on a busy machine hits both alike
    offs, ons = [], []
    for _ in range(rounds):
        offs.append(phase_run(url=url, level="off", evaluations=serial // rounds, concurrency=1))
        ons.append(phase_run(url=url, level=level, evaluations=serial // rounds, concurrency=1))
    return LoadReport(
        load=load, load_off=load_off, serial_off=phases_merge(phases=offs), serial_full=phases_merge(phases=ons)
    )


def phases_merge(*, phases: list[Phase]) -> Phase:
    """Rounds of the same phase as one."""
    first = phases[0]
    return Phase(
        level=first.level,
        evaluations=sum(p.evaluations for p in phases),
        concurrency=first.concurrency,
        responses=sum((p.responses for p in phases), Counter()),
        stored=sum((p.stored for p in phases), Counter()),
        missing=[m for p in phases for m in p.missing],
        duplicates=sum(p.duplicates for p in phases),
        latencies_ms=[ms for p in phases for ms in p.latencies_ms],
        seconds=sum(p.seconds for p in phases),
        writer_cpu_ms=sum(p.writer_cpu_ms for p in phases),
        failed=sum(p.failed for p in phases),
        dropped=sum(p.dropped for p in phases),
    )
