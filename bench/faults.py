"""Faults on real parts (issue 25, item 7): two API processes (`manage.py serve --connect GATEWAY --workers 2`)
behind the real SGLang gateway (`smg`) with two SGLang stand-ins in processes of their own, PostgreSQL storage
and Redis for the per-key limits, under a fixed-rate load of several API keys (one over its own requests-per-
minute limit), while in turn one API worker is SIGKILLed (serve replaces it while the other answers on; the
fault lasts until the replacement answers too), one stand-in is SIGKILLed and started again, and Redis is
restarted (its counts are lost: CI's Redis keeps nothing on disk).

It prints the requests answered per status, before, during and after each fault, with their p50/p99 latency;
the evaluations stored against those answered (rows looked up by request id after serve's SIGTERM shutdown);
each key's 429 share against its limit; and the invariants that held or did not.

    .venv/bin/python bench/faults.py                       # 15 s phases, 6 req/s per steady key
    .venv/bin/python bench/faults.py --phase 30 --rate 10

`tests/gateway/test_faults.py` runs the same scenario with short phases and asserts the invariants.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from api.systemone.examples import README_REQUEST  # noqa: E402
from audit.storage.writer import BATCH_MAX  # noqa: E402
from bench.server import database_for_run, keys_launch, keys_read, process_tree, wait_http  # noqa: E402
from testbed.faults import REDIS_URL, Caller, OpenLoad, Sent, StandIn, redis_restart, redis_start  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402
from testbed.smg import FAST_HEALTH, Gateway, wait_until  # noqa: E402

MODEL = "Qwen/Qwen3.6-35B-A3B"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
NOISY = "noisy"
"""The key that sends over its own requests-per-minute limit."""
KILL_MARGIN_SECONDS = 2.0
"""Answers received this long before the SIGKILL count as the killed worker's possibly unwritten batch."""
KILL_ANSWERED_MIN = 0.9
"""The share of requests sent while a worker is dead and replaced that must get an HTTP answer: the other
worker answers on, only the dead one's requests in flight and in its accept queue are lost."""


@dataclass(frozen=True)
class Plan:
    """How long each phase lasts and what the load sends."""

    quiet_seconds: float = 15.0
    """The start with the steady keys alone: their latency without a key over its limit beside them."""
    phase_seconds: float = 15.0
    """The baseline, and the stretch after each fault."""
    steady_keys: int = 3
    rate: float = 6.0
    """Requests per second of each steady key (no limit of its own)."""
    noisy_rate: float = 5.0
    noisy_limit: int = 60
    """The noisy key's requests per minute: it sends `noisy_rate` × 60 a minute, over its limit."""
    backend_delay: float = 0.01
    down_seconds: float = 2.0
    """How long the stand-in and Redis stay down."""
    drain_seconds: float = 5.0


@dataclass(frozen=True)
class Window:
    """A fault, from the moment it is made until the part is back (and serving again, for serve)."""

    name: str
    start: float
    end: float

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


@dataclass
class LimiterWindow:
    """One window of the noisy key's limit as the limiter counts it. `limits`' sliding-window counter in
    Redis starts a key's window at its first counted request and runs 60 s windows back to back from there;
    a Redis restart loses the counts, and the windows start again at the first request after it. The hit
    happens somewhere between a request's sending and its answer, so `sure` counts the 200s certainly counted
    inside this window; `answered`, every 200 sent in it."""

    start: float
    end: float
    after_redis: bool
    answered: int = 0
    sure: int = 0


def api_env(*, database_url: str, gateway_url: str) -> dict[str, str]:
    """What every API process of the scenario runs with: PostgreSQL, Redis, keys required, storage full, and
    the backend `--connect` names already set, so serve starts without re-executing itself (one import less)."""
    return {
        **os.environ,
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": MODEL,
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_BACKEND_URL": gateway_url,
        "OPENJEV_STORE_EVALUATIONS": "full",
        "OPENJEV_DATABASE_URL": database_url,
        "OPENJEV_REDIS_URL": REDIS_URL,
        "OPENJEV_REQUIRE_API_KEY": "true",
        "OPENJEV_SECRET_KEY": "faults-" + "x" * 50,
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
    }


class ApiUnit:
    """`manage.py serve --connect GATEWAY --workers 2` on one port: started, one worker SIGKILLed, stopped."""

    def __init__(self, *, env: dict[str, str], drain: float, log_path: Path, probe_key: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._argv = [
            sys.executable,
            "manage.py",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--connect",
            env["OPENJEV_BACKEND_URL"],
            "--workers",
            "2",
            "--drain",
            str(drain),
        ]
        self._env = env
        self._drain = drain
        self._log_path = log_path
        self._probe_key = probe_key
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start serve and return once both of its workers answer `/health` (each names its pid to a key)."""
        with self._log_path.open("ab") as log:
            self._process = subprocess.Popen(
                self._argv, cwd=ROOT, env=self._env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        wait_http(self.url + "/health", timeout=120)
        self.answering_wait(gone=set())

    def answering_wait(self, *, gone: set[int]) -> dict[str, int]:
        """Return once two workers, none of them `gone`, answer `/health` (each names its pid to a key); what
        the last answer says of serve's workers."""
        seen: set[int] = set()
        workers: dict[str, int] = {}

        def both_answer() -> bool:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"serve exited with {self._process.returncode}")
            try:
                with httpx.Client(base_url=self.url, timeout=30) as client:  # one connection: one worker
                    answer = client.get("/health", headers={"Authorization": f"Bearer {self._probe_key}"}).json()
            except httpx.TransportError:  # a connection the killed worker had accepted, or queued for it, is reset
                time.sleep(0.05)
                return False
            seen.add(int(answer.get("worker_pid", 0)))
            workers.update(answer.get("workers", {}))
            if len(seen - gone - {0}) >= 2:
                return True
            time.sleep(0.05)  # wait_until polls every 2 ms: a replacement starting needs the core
            return False

        wait_until(both_answer, timeout=60, what="two API workers answering /health")
        return workers

    def workers(self) -> list[int]:
        """serve's API workers (not the batch worker beside them)."""
        assert self._process is not None
        return [pid for pid in process_tree(self._process.pid)[1:] if b"batch_worker" not in _cmdline(pid)]

    def processes(self) -> list[int]:
        """serve and its API workers (not the batch worker beside them), sorted."""
        assert self._process is not None
        return sorted(pid for pid in process_tree(self._process.pid) if b"batch_worker" not in _cmdline(pid))

    def restart_killed(self) -> None:
        """SIGKILL serve and every process it started, at once, then start it again on the same port and return
        once both new workers answer."""
        assert self._process is not None
        for pid in process_tree(self._process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._process.wait(10)
        self.start()

    def worker_kill(self) -> tuple[dict[str, int], int | None]:
        """SIGKILL one worker and return once its replacement answers beside the other: what `/health` then
        says of the workers, and serve's exit status (None: it ran on, as it should)."""
        assert self._process is not None
        killed = self.workers()[0]
        os.kill(killed, signal.SIGKILL)
        try:
            workers = self.answering_wait(gone={killed})
        except RuntimeError:
            workers = {}
        return workers, self._process.poll()

    def stop(self) -> int | None:
        """SIGTERM: every worker drains its requests and its storage writer, then serve exits (0)."""
        if self._process is None or self._process.poll() is not None:
            return None if self._process is None else self._process.returncode
        self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(self._drain + 30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            return self._process.wait(10)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def rows_stored(*, database_url: str, request_ids: list[str]) -> dict[str, int]:
    """Stored status by request id, for the ids asked about."""
    with psycopg.connect(database_url) as connection:
        rows = connection.execute(
            "SELECT request_id, status_code FROM evaluations_evaluation WHERE request_id = ANY(%s)", (request_ids,)
        ).fetchall()
    return {request_id: status for request_id, status in rows}


def percentile(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass(frozen=True)
class FaultRun:
    """What the load sent and got, the fault windows, and what the database holds afterwards."""

    plan: Plan
    callers: list[Caller]
    started: float
    noisy_from: float
    ended: float
    windows: list[Window]
    results: list[Sent]
    stored: dict[str, int]
    kill_status: int | None
    """serve's exit status once its SIGKILLed worker's replacement answered; None: it ran on."""
    kill_workers: dict[str, int]
    """What `/health` then said of serve's workers (up, configured, replaced)."""
    stop_status: int | None

    def segments(self) -> list[Window]:
        """The run cut at every fault: quiet, before, then during and after each fault."""
        cuts = [
            Window("quiet (steady keys only)", self.started, self.noisy_from),
            Window("before", self.noisy_from, self.windows[0].start),
        ]
        for index, window in enumerate(self.windows):
            following = self.windows[index + 1].start if index + 1 < len(self.windows) else self.ended
            cuts += [
                Window(f"during: {window.name}", window.start, window.end),
                Window(f"after: {window.name}", window.end, following),
            ]
        return cuts

    def window_of(self, sent: Sent) -> Window | None:
        return next((w for w in self.windows if w.holds(sent.sent_at)), None)

    def answered(self) -> list[Sent]:
        return [sent for sent in self.results if sent.status != 0]

    def evaluated(self) -> list[Sent]:
        """Answers that reached an evaluation, so must have a row: all but the 429s, which this load gets only
        from the noisy key's request limit, refused before its body is read and not stored (docs/storage.md)."""
        return [sent for sent in self.answered() if sent.status != 429]

    def unstored(self) -> list[Sent]:
        """Evaluated requests that have no row (every answer carries its request id)."""
        return [sent for sent in self.evaluated() if sent.request_id not in self.stored]

    def unstored_at_kill(self) -> tuple[list[Sent], list[Sent]]:
        """Unstored answers received around the SIGKILL (the killed worker's batch), and all the others."""
        kill = self.windows[0]
        near = [s for s in self.unstored() if kill.start - KILL_MARGIN_SECONDS <= s.done_at < kill.end]
        return near, [s for s in self.unstored() if s not in near]

    def noisy_windows(self) -> list[LimiterWindow]:
        """The noisy key's limiter windows: from its first request until Redis went down, and from its first
        request after Redis was back until the end (its 200s during the outage are `noisy_unlimited`)."""
        redis = self.windows[-1]
        noisy = [s for s in self.results if s.caller == NOISY]
        found: list[LimiterWindow] = []
        for after_redis, epoch in (
            (False, [s for s in noisy if s.sent_at < redis.start]),
            (True, [s for s in noisy if s.sent_at >= redis.end]),
        ):
            if not epoch:
                continue
            anchor, until = epoch[0], (redis.start if not after_redis else self.ended)
            for k in range(math.ceil((until - anchor.sent_at) / 60)):
                window = LimiterWindow(anchor.sent_at + 60 * k, min(anchor.sent_at + 60 * (k + 1), until), after_redis)
                for sent in epoch:
                    if sent.status == 200 and window.start <= sent.sent_at < window.end:
                        window.answered += 1
                        window.sure += anchor.done_at + 60 * k <= sent.sent_at and sent.done_at <= window.end
                found.append(window)
        return found

    def noisy_unlimited(self) -> int:
        """The noisy key's 200s sent while Redis was down (the limits fail open)."""
        return sum(s.status == 200 and self.windows[-1].holds(s.sent_at) for s in self.results if s.caller == NOISY)

    def share_ok(self, caller: str, *, where: Callable[[Sent], bool]) -> tuple[int, int]:
        """(200s, requests) of `caller` among those `where` selects."""
        picked = [sent for sent in self.results if sent.caller == caller and where(sent)]
        return sum(sent.status == 200 for sent in picked), len(picked)

    def problems(self) -> list[str]:
        """Every invariant of the scenario that did not hold; empty when all did."""
        found = []
        outside_5xx = Counter(s.status for s in self.results if s.status >= 500 and self.window_of(s) is None)
        if outside_5xx:
            found.append(f"5xx outside the fault windows: {dict(outside_5xx)}")
        outside_lost = Counter(s.status for s in self.results if s.status == 0 and self.window_of(s) is None)
        if outside_lost:
            found.append(f"requests without an answer outside the fault windows: {sum(outside_lost.values())}")
        near, other = self.unstored_at_kill()
        if len(near) > BATCH_MAX:
            found.append(f"{len(near)} answers around the SIGKILL not stored (the writer's batch is {BATCH_MAX})")
        if other:
            found.append(f"{len(other)} answers not stored away from the SIGKILL, e.g. {other[0]}")
        mismatched = [s for s in self.answered() if self.stored.get(s.request_id or "", s.status) != s.status]
        if mismatched:
            found.append(f"{len(mismatched)} rows stored with another status than answered, e.g. {mismatched[0]}")
        limit = self.plan.noisy_limit
        for window in self.noisy_windows():
            if window.sure > limit:
                found.append(
                    f"noisy key: {window.sure} answers with 200 in the limiter window from "
                    f"{window.start - self.started:.1f} s on, limit {limit}"
                )
        for caller in self.callers:
            if caller.name == NOISY:
                continue
            ok, asked = self.share_ok(caller.name, where=lambda s: self.window_of(s) is None)
            if ok < 0.95 * asked:
                found.append(f"{caller.name}: {ok}/{asked} answered 200 outside the fault windows (< 95 %)")
            limited = sum(s.status == 429 for s in self.results if s.caller == caller.name)
            if limited:
                found.append(f"{caller.name} (no limit of its own) got {limited} 429s")
        if self.kill_status is not None:
            found.append(f"serve exited with {self.kill_status} after one worker's SIGKILL (expected: replaced)")
        elif self.kill_workers != {"up": 2, "configured": 2, "replaced": 1}:
            found.append(f"/health reported {self.kill_workers} after the replacement (expected 2 up, 1 replaced)")
        kill = self.windows[0]
        during_kill = [s for s in self.results if kill.holds(s.sent_at)]
        if sum(s.status != 0 for s in during_kill) < KILL_ANSWERED_MIN * len(during_kill):
            found.append(
                f"{sum(s.status == 0 for s in during_kill)} of {len(during_kill)} requests without an answer while "
                f"a worker was replaced (at most {100 * (1 - KILL_ANSWERED_MIN):.0f} %)"
            )
        if self.stop_status != 0:
            found.append(f"serve exited with {self.stop_status} on SIGTERM (expected 0)")
        return found

    def lines(self) -> list[str]:
        """The figures, as Markdown tables."""
        statuses = sorted({s.status for s in self.results})
        names = ["no answer" if status == 0 else str(status) for status in statuses]
        out = [
            f"load: {len(self.callers) - 1} steady keys at {self.plan.rate:g} req/s each, the noisy key at "
            f"{self.plan.noisy_rate:g} req/s with a limit of {self.plan.noisy_limit}/min (from "
            f"{self.noisy_from - self.started:.0f} s on), {len(self.results)} requests in "
            f"{self.ended - self.started:.1f} s; "
            + (
                f"serve ran on through the worker's SIGKILL (/health then: workers {self.kill_workers}), "
                if self.kill_status is None
                else f"serve exited {self.kill_status} after the worker's SIGKILL, "
            )
            + f"exited {self.stop_status} on the final SIGTERM",
            "",
            "| phase | seconds | sent | " + " | ".join(names) + " | p50 ms | p99 ms | steady keys' p99 ms |",
            "|---|---|---|" + "---|" * len(names) + "---|---|---|",
        ]
        for segment in self.segments():
            picked = [s for s in self.results if segment.holds(s.sent_at)]
            counts = Counter(s.status for s in picked)
            ok_ms = [s.latency_ms for s in picked if s.status == 200]
            steady_ms = [s.latency_ms for s in picked if s.status == 200 and s.caller != NOISY]
            out.append(
                f"| {segment.name} | {segment.end - segment.start:.1f} | {len(picked)} | "
                + " | ".join(str(counts.get(status, 0)) for status in statuses)
                + f" | {_ms(percentile(ok_ms, 50))} | {_ms(percentile(ok_ms, 99))} | "
                f"{_ms(percentile(steady_ms, 99))} |"
            )
        total = Counter(s.status for s in self.results)
        out.append(
            "| **all** | | "
            + f"{len(self.results)} | "
            + " | ".join(str(total.get(s, 0)) for s in statuses)
            + " | | | |"
        )
        alone, beside = (
            percentile(
                [s.latency_ms for s in self.results if w.holds(s.sent_at) and s.status == 200 and s.caller != NOISY], 99
            )
            for w in self.segments()[:2]
        )
        if alone and beside:
            out += [
                "",
                f"steady keys' p99: {alone:.1f} ms alone, {beside:.1f} ms beside the noisy key over its limit "
                f"({100 * (beside / alone - 1):+.0f} %; the issue's target: at most +10 %)",
            ]
        near, other = self.unstored_at_kill()
        out += [
            "",
            f"stored: {len(self.evaluated()) - len(self.unstored())} of {len(self.evaluated())} evaluated "
            "requests have their row (the 429s, refused before their body, are not stored); not stored: "
            f"{len(near)} answered within {KILL_MARGIN_SECONDS:g} s "
            f"before the SIGKILL or during it (the bound: the writer's batch, {BATCH_MAX}), "
            f"{len(other)} elsewhere (the bound: 0)",
            "",
            "| key | limit/min | sent | 200 | 429 | other | 429 share | 200 share outside the fault windows |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for caller in self.callers:
            mine = [s for s in self.results if s.caller == caller.name]
            counts = Counter(s.status for s in mine)
            ok, asked = self.share_ok(caller.name, where=lambda s: self.window_of(s) is None)
            other_count = len(mine) - counts[200] - counts[429]
            out.append(
                f"| {caller.name} | {caller.requests_per_minute or 'none'} | {len(mine)} | {counts[200]} | "
                f"{counts[429]} | {other_count} | {_pct(counts[429], len(mine))} | {_pct(ok, asked)} |"
            )
        out += [
            "",
            "| noisy key's limiter window | seconds | Redis | 200s sent in it | 200s surely counted in it | limit |",
            "|---|---|---|---|---|---|",
        ]
        for window in self.noisy_windows():
            out.append(
                f"| from {window.start - self.started:.1f} s | {window.end - window.start:.1f} | "
                f"{'restarted, counts lost' if window.after_redis else 'up'} | {window.answered} | "
                f"{window.sure} | {self.plan.noisy_limit} |"
            )
        out.append(
            f"| Redis down | {self.windows[-1].end - self.windows[-1].start:.1f} | down: fail open | "
            f"{self.noisy_unlimited()} | — | none |"
        )
        problems = self.problems()
        out += ["", "invariants: " + ("all held" if not problems else "NOT HELD: " + "; ".join(problems))]
        return out


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _pct(part: int, whole: int) -> str:
    return "—" if not whole else f"{100 * part / whole:.1f} %"


def faults_run(*, plan: Plan, workdir: Path, progress: Callable[[str], None] = lambda line: None) -> FaultRun:
    """The whole scenario, every part started here and stopped again (Redis left running)."""
    stand_ins = [
        StandIn(port=free_port(), model=MODEL, delay=plan.backend_delay, log_path=workdir / f"stand-in-{i}.log")
        for i in range(2)
    ]
    steady: dict[str, int | None] = {f"steady-{i + 1}": None for i in range(plan.steady_keys)}
    with database_for_run(POSTGRES_URL) as database_url:
        api: ApiUnit | None = None
        limits = {name: {"requests_per_minute": limit} for name, limit in {**steady, NOISY: plan.noisy_limit}.items()}
        keys = keys_launch(database_url=database_url, limits=limits, owner="bench/faults.py")
        try:
            for stand_in in stand_ins:
                stand_in.launch()
            for stand_in in stand_ins:
                stand_in.ready_wait()
            redis_start()
            urls = [stand_in.url for stand_in in stand_ins]
            with Gateway(workers=urls, log_path=workdir / "smg.log", flags=FAST_HEALTH) as gateway:
                env = api_env(database_url=database_url, gateway_url=gateway.url)
                secrets = keys_read(keys)
                callers = [Caller(name, secrets[name], plan.rate) for name in steady]
                callers.append(Caller(NOISY, secrets[NOISY], plan.noisy_rate, plan.noisy_limit, plan.quiet_seconds))
                api = ApiUnit(
                    env=env,
                    drain=plan.drain_seconds,
                    log_path=workdir / "serve.log",
                    probe_key=secrets[callers[0].name],
                )
                api.start()
                progress(f"serving on {api.url} (workers {api.workers()}), gateway {gateway.url}, logs in {workdir}")
                run = _faults_make(
                    plan=plan, api=api, gateway=gateway, stand_ins=stand_ins, callers=callers, progress=progress
                )
                run = replace(run, stop_status=api.stop())
        finally:
            if keys.poll() is None:  # done by now, unless something failed first
                keys.kill()
                keys.wait()
            if api is not None:
                api.stop()
            for stand_in in stand_ins:
                stand_in.kill()
            redis_start()
        return replace(
            run,
            stored=rows_stored(
                database_url=database_url, request_ids=[s.request_id for s in run.results if s.request_id]
            ),
        )


def _faults_make(
    *,
    plan: Plan,
    api: ApiUnit,
    gateway: Gateway,
    stand_ins: list[StandIn],
    callers: list[Caller],
    progress: Callable[[str], None],
) -> FaultRun:
    """Run the load, and the three faults one after another with `plan.phase_seconds` between them."""
    load = OpenLoad(
        url=api.url,
        path="/v1/systemone",
        body=README_REQUEST,
        callers=callers,
        max_seconds=plan.quiet_seconds + 5 * plan.phase_seconds + 180,
    )
    windows: list[Window] = []

    def fault(name: str, make: Callable[[], None]) -> None:
        time.sleep(plan.phase_seconds)
        start = time.time()
        make()
        windows.append(Window(name, start, time.time()))
        progress(f"{name}: {windows[-1].end - start:.1f} s")

    def worker_replace() -> None:
        kill.append(api.worker_kill())

    def stand_in_restart() -> None:
        stand_ins[0].kill()
        time.sleep(plan.down_seconds)
        stand_ins[0].start()
        gateway.wait_all_healthy()

    kill: list[tuple[dict[str, int], int | None]] = []
    started = time.time()
    load.start()
    try:
        time.sleep(plan.quiet_seconds)
        noisy_from = time.time()
        fault("API worker SIGKILL, replaced", worker_replace)
        fault("stand-in SIGKILL and restart", stand_in_restart)
        fault("Redis restart", lambda: redis_restart(down_seconds=plan.down_seconds))
        time.sleep(plan.phase_seconds)
    except BaseException:
        load.stop()  # it would go on sending to parts that are gone
        raise
    ended = time.time()
    return FaultRun(
        plan=plan,
        callers=callers,
        started=started,
        noisy_from=noisy_from,
        ended=ended,
        windows=windows,
        results=load.stop(),
        stored={},
        kill_status=kill[0][1],
        kill_workers=kill[0][0],
        stop_status=None,
    )


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", type=float, default=15.0, help="seconds of each phase (quiet, before, after each)")
    parser.add_argument("--rate", type=float, default=6.0, help="requests/s of each steady key")
    parser.add_argument("--noisy-rate", type=float, default=5.0, help="requests/s of the noisy key")
    parser.add_argument("--noisy-limit", type=int, default=60, help="the noisy key's requests per minute")
    args = parser.parse_args(None if argv is None else list(argv))
    plan = Plan(phase_seconds=args.phase, rate=args.rate, noisy_rate=args.noisy_rate, noisy_limit=args.noisy_limit)
    workdir = Path(tempfile.mkdtemp(prefix="openjev-faults-"))
    run = faults_run(plan=plan, workdir=workdir, progress=lambda line: print(line, flush=True))
    print("\n".join(run.lines()))
    (workdir / "results.json").write_text(
        json.dumps({"windows": [asdict(w) for w in run.windows], "results": [asdict(s) for s in run.results]})
    )
    print(f"\nlogs: {workdir}")
    if run.problems():
        sys.exit(1)


if __name__ == "__main__":
    main()
