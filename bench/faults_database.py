"""Database faults on real parts (issue 41): `manage.py serve --workers 2` on PostgreSQL reached through a TCP proxy
of its own (`testbed.tcp_proxy`), against an SGLang stand-in, keys required, under a steady open-loop load of
several API keys, while in turn the proxy is frozen (SIGSTOP: connections open, nothing answered), killed (every
connection cut, new ones refused) and started again, and `serve` with all its processes is SIGKILLed and started
again on the same port.

It prints the requests answered per status, before, during and after each fault, with their p50/p99 latency; the
evaluations stored against those answered (rows looked up by request id, straight from PostgreSQL, after serve's
SIGTERM shutdown); the database warnings the log holds, per process; and the invariants that held or did not:
no 5xx at all; p99 while frozen within 3x the control's; serve and its workers the same processes through both
proxy faults; every answered evaluation stored with the status it was answered with; at most one warning per
process per outage, each with its closing line.

    .venv/bin/python bench/faults_database.py                # 15 s phases, 10 s frozen, 60 s down: ~3 minutes
    .venv/bin/python bench/faults_database.py --down 15 --phase 5

`tests/gateway/test_faults.py` runs it short (10 s frozen, 15 s down) and asserts the invariants.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")

import django  # noqa: E402

django.setup()

from api.systemone.examples import README_REQUEST  # noqa: E402
from bench.faults import POSTGRES_URL, ApiUnit, percentile, rows_stored  # noqa: E402
from bench.server import database_for_run, keys_launch, keys_read  # noqa: E402
from testbed.faults import Caller, OpenLoad, Sent, StandIn  # noqa: E402
from testbed.ports import free_port  # noqa: E402
from testbed.qwen3 import qwen3_dir  # noqa: E402
from testbed.tcp_proxy import TcpProxy  # noqa: E402

MODEL = "Qwen/Qwen3.6-35B-A3B"
FROZEN_P99_MAX = 3.0
"""The p99 while the database is frozen may be at most this many times the control's."""
WARNING = re.compile(r"^(\S+ \S+) WARNING audit\.database the database (unavailable|available again) to process (\d+)")
LOGGED = re.compile(r"^(\S+ \S+) (WARNING|ERROR|CRITICAL) (\S+) (.*)$")
ROUTINE = ("label mass under",)
"""Warnings every request of this load logs (the stand-in's answers are no model's): not the faults' doing."""


@dataclass(frozen=True)
class DatabasePlan:
    phase_seconds: float = 15.0
    """The control, and the stretch after each fault."""
    freeze_seconds: float = 10.0
    down_seconds: float = 60.0
    keys: int = 2
    rate: float = 5.0
    """Requests per second of each key."""
    backend_delay: float = 0.01
    drain_seconds: float = 10.0


@dataclass(frozen=True)
class Window:
    name: str
    start: float
    end: float

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end


@dataclass(frozen=True)
class DatabaseRun:
    plan: DatabasePlan
    started: float
    ended: float
    windows: list[Window]
    """control, frozen, proxy killed, serve killed: each from the fault until the part is back."""
    results: list[Sent]
    stored: dict[str, int]
    processes_before: list[int]
    processes_after: list[int]
    """serve and its API workers before the proxy faults and after them (the same: nothing restarted)."""
    warnings: list[tuple[float, str, int]]
    """The log's database lines: (time, "unavailable" or "available again", process)."""
    others: Counter[str]
    """Every other warning or error line of the log from the first fault on, by level and logger."""
    stop_status: int | None

    def segments(self) -> list[Window]:
        control, *faults = self.windows
        cuts = [control]
        for index, window in enumerate(faults):
            following = faults[index + 1].start if index + 1 < len(faults) else self.ended
            cuts += [window, Window(f"after: {window.name}", window.end, following)]
        return cuts

    def picked(self, window: Window, *, status: int | None = None) -> list[Sent]:
        return [s for s in self.results if window.holds(s.sent_at) and (status is None or s.status == status)]

    def p99(self, window: Window) -> float | None:
        return percentile([s.latency_ms for s in self.picked(window, status=200)], 99)

    def evaluated(self) -> list[Sent]:
        """Answered requests that reached an evaluation: every answer but a 429 or a 401/503 from the key check."""
        return [s for s in self.results if s.status not in (0, 401, 429) and s.request_id]

    def unstored(self) -> list[Sent]:
        return [s for s in self.evaluated() if s.request_id not in self.stored]

    def outages(self) -> list[Window]:
        """The two database faults (frozen, killed)."""
        return self.windows[1:3]

    def warnings_per_outage(self) -> list[Counter[int]]:
        """For each database fault, the "unavailable" warnings per process from its start to the next fault's."""
        frozen, killed, serve_killed = self.windows[1:4]
        return [
            Counter(pid for at, kind, pid in self.warnings if kind == "unavailable" and start <= at < end)
            for start, end in ((frozen.start, killed.start), (killed.start, serve_killed.start))
        ]

    def problems(self) -> list[str]:
        found = []
        errors = Counter(s.status for s in self.results if s.status >= 500)
        if errors:
            found.append(f"5xx answers: {dict(errors)}")
        control, frozen = self.windows[0], self.windows[1]
        control_p99, frozen_p99 = self.p99(control), self.p99(frozen)
        if control_p99 is None or frozen_p99 is None:
            found.append("no answer in the control or while frozen")
        elif frozen_p99 > FROZEN_P99_MAX * control_p99:
            found.append(
                f"p99 while frozen {frozen_p99:.1f} ms, over {FROZEN_P99_MAX:g}x the control's {control_p99:.1f}"
            )
        if self.processes_after != self.processes_before:
            found.append(
                f"serve's processes changed through the proxy faults: {self.processes_before} -> {self.processes_after}"
            )
        if self.unstored():
            found.append(f"{len(self.unstored())} answered evaluations not stored, e.g. {self.unstored()[0]}")
        mismatched = [s for s in self.evaluated() if self.stored.get(s.request_id or "", s.status) != s.status]
        if mismatched:
            found.append(f"{len(mismatched)} rows stored with another status than answered, e.g. {mismatched[0]}")
        for window, per_process in zip(self.outages(), self.warnings_per_outage(), strict=True):
            repeated = {pid: n for pid, n in per_process.items() if n > 1}
            if repeated:
                found.append(f"{window.name}: more than one warning per process {repeated}")
        down = self.warnings_per_outage()[1]
        if not down:
            found.append("the proxy was killed and no process logged the database unavailable")
        opened = Counter(pid for _, kind, pid in self.warnings if kind == "unavailable")
        closed = Counter(pid for _, kind, pid in self.warnings if kind == "available again")
        if opened != closed:
            found.append(f"outages without their closing line: opened {dict(opened)}, closed {dict(closed)}")
        if self.stop_status != 0:
            found.append(f"serve exited with {self.stop_status} on SIGTERM (expected 0)")
        return found

    def lines(self) -> list[str]:
        statuses = sorted({s.status for s in self.results})
        names = ["no answer" if status == 0 else str(status) for status in statuses]
        out = [
            f"load: {self.plan.keys} keys at {self.plan.rate:g} req/s each, {len(self.results)} requests in "
            f"{self.ended - self.started:.1f} s; serve --workers 2 on PostgreSQL through a TCP proxy; the proxy "
            f"frozen {self.plan.freeze_seconds:g} s, killed for {self.plan.down_seconds:g} s; then serve and its "
            f"processes SIGKILLed and started again; serve exited {self.stop_status} on the final SIGTERM",
            "",
            "| phase | seconds | sent | " + " | ".join(names) + " | p50 ms | p99 ms |",
            "|---|---|---|" + "---|" * len(names) + "---|---|",
        ]
        for segment in self.segments():
            picked = self.picked(segment)
            counts = Counter(s.status for s in picked)
            ok_ms = [s.latency_ms for s in picked if s.status == 200]
            out.append(
                f"| {segment.name} | {segment.end - segment.start:.1f} | {len(picked)} | "
                + " | ".join(str(counts.get(status, 0)) for status in statuses)
                + f" | {_ms(percentile(ok_ms, 50))} | {_ms(percentile(ok_ms, 99))} |"
            )
        evaluated = self.evaluated()
        out += [
            "",
            f"stored: {len(evaluated) - len(self.unstored())} of {len(evaluated)} answered evaluations have their row",
            "database warnings in the log: "
            + "; ".join(
                f"{w.name}: {sum(c.values())} from {len(c)} process(es)"
                for w, c in zip(self.outages(), self.warnings_per_outage(), strict=True)
            )
            + f"; {sum(kind == 'available again' for _, kind, _ in self.warnings)} closing lines in all",
            "other warnings and errors in the log from the first fault on: "
            + (", ".join(f"{name}: {n}" for name, n in sorted(self.others.items())) or "none"),
        ]
        problems = self.problems()
        out += ["", "invariants: " + ("all held" if not problems else "NOT HELD: " + "; ".join(problems))]
        return out


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def warnings_read(log_path: Path, *, since: float) -> tuple[list[tuple[float, str, int]], Counter[str]]:
    """The database's lines in the log, and a count of the other warnings and errors from `since` on."""
    found, others = [], Counter[str]()
    for line in log_path.read_text(errors="replace").splitlines():
        if matched := WARNING.match(line):
            found.append((_logged_at(matched.group(1)), matched.group(2), int(matched.group(3))))
        elif (logged := LOGGED.match(line)) and _logged_at(logged.group(1)) >= since and not _routine(logged[4]):
            others[f"{logged.group(2)} {logged.group(3)}"] += 1
    return found, others


def _routine(message: str) -> bool:
    return any(routine in message for routine in ROUTINE)


def _logged_at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def api_env(*, database_url: str, backend_url: str, spool: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OPENJEV_TOKENIZER": str(qwen3_dir()),
        "OPENJEV_MODEL": MODEL,
        "OPENJEV_BACKEND": "sglang",
        "OPENJEV_BACKEND_URL": backend_url,
        "OPENJEV_STORE_EVALUATIONS": "full",
        "OPENJEV_DATABASE_URL": database_url,
        "OPENJEV_SPOOL_DIR": str(spool),
        "OPENJEV_REQUIRE_API_KEY": "true",
        "OPENJEV_LOG_FORMAT": "text",
        "OPENJEV_SECRET_KEY": "faults-" + "x" * 50,
        "DJANGO_SETTINGS_MODULE": "openjev_site.settings",
        "PYTHONPATH": str(ROOT),
    }


def database_faults_run(
    *, plan: DatabasePlan, workdir: Path, progress: Callable[[str], None] = lambda line: None
) -> DatabaseRun:
    """The whole scenario, every part started here and stopped again."""
    stand_in = StandIn(port=free_port(), model=MODEL, delay=plan.backend_delay, log_path=workdir / "stand-in.log")
    names = [f"key-{i + 1}" for i in range(plan.keys)]
    with database_for_run(POSTGRES_URL) as database_url:
        keys = keys_launch(
            database_url=database_url, limits={name: {} for name in names}, owner="bench/faults_database"
        )
        proxy = TcpProxy(port=free_port(), upstream="127.0.0.1:5432", log_path=workdir / "proxy.log")
        api: ApiUnit | None = None
        try:
            stand_in.start()
            proxy.start()
            secrets = keys_read(keys)
            proxied = database_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
            env = api_env(database_url=proxied, backend_url=stand_in.url, spool=workdir / "spool")
            api = ApiUnit(
                env=env, drain=plan.drain_seconds, log_path=workdir / "serve.log", probe_key=secrets[names[0]]
            )
            api.start()
            progress(
                f"serving on {api.url} (processes {api.processes()}), database through :{proxy.port}, logs in {workdir}"
            )
            callers = [Caller(name, secrets[name], plan.rate) for name in names]
            run = _faults_make(plan=plan, api=api, proxy=proxy, callers=callers, progress=progress)
            run = replace(run, stop_status=api.stop())
        finally:
            if keys.poll() is None:  # done by now, unless something failed first
                keys.kill()
                keys.wait()
            if api is not None:
                api.stop()
            proxy.kill()
            stand_in.kill()
        stored = rows_stored(database_url=database_url, request_ids=[s.request_id for s in run.results if s.request_id])
        warnings, others = warnings_read(workdir / "serve.log", since=run.windows[1].start)
        return replace(run, stored=stored, warnings=warnings, others=others)


def _faults_make(
    *, plan: DatabasePlan, api: ApiUnit, proxy: TcpProxy, callers: list[Caller], progress: Callable[[str], None]
) -> DatabaseRun:
    load = OpenLoad(
        url=api.url,
        path="/v1/systemone",
        body=README_REQUEST,
        callers=callers,
        max_seconds=4 * plan.phase_seconds + plan.freeze_seconds + plan.down_seconds + 240,
    )
    windows: list[Window] = []

    def fault(name: str, make: Callable[[], None]) -> None:
        start = time.time()
        make()
        windows.append(Window(name, start, time.time()))
        progress(f"{name}: {windows[-1].end - start:.1f} s")
        time.sleep(plan.phase_seconds)

    def frozen() -> None:
        proxy.freeze()
        time.sleep(plan.freeze_seconds)
        proxy.thaw()

    def down() -> None:
        proxy.kill()
        time.sleep(plan.down_seconds)
        proxy.start()

    started = time.time()
    load.start()
    try:
        time.sleep(plan.phase_seconds)
        windows.append(Window("control", started, time.time()))
        before = api.processes()
        fault("database frozen", frozen)
        fault("database killed and started again", down)
        after = api.processes()
        fault("serve SIGKILLed and started again", api.restart_killed)
    except BaseException:
        load.stop()
        raise
    ended = time.time()
    return DatabaseRun(
        plan=plan,
        started=started,
        ended=ended,
        windows=windows,
        results=load.stop(),
        stored={},
        processes_before=before,
        processes_after=after,
        warnings=[],
        others=Counter(),
        stop_status=None,
    )


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", type=float, default=15.0, help="seconds of the control and after each fault")
    parser.add_argument("--freeze", type=float, default=10.0, help="seconds the proxy is frozen")
    parser.add_argument("--down", type=float, default=60.0, help="seconds the proxy is killed")
    parser.add_argument("--rate", type=float, default=5.0, help="requests/s of each key")
    parser.add_argument("--keys", type=int, default=2)
    args = parser.parse_args(None if argv is None else list(argv))
    plan = DatabasePlan(
        phase_seconds=args.phase, freeze_seconds=args.freeze, down_seconds=args.down, rate=args.rate, keys=args.keys
    )
    workdir = Path(tempfile.mkdtemp(prefix="openjev-db-faults-"))
    print(f"{datetime.now():%Y-%m-%d %H:%M}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    run = database_faults_run(plan=plan, workdir=workdir, progress=lambda line: print(line, flush=True))
    print("\n".join(run.lines()))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    (workdir / "results.json").write_text(
        json.dumps({"windows": [asdict(w) for w in run.windows], "results": [asdict(s) for s in run.results]})
    )
    print(f"\nlogs: {workdir}")
    if run.problems():
        sys.exit(1)


if __name__ == "__main__":
    main()
