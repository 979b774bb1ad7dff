"""Faults on real parts (issue 25, item 7), the short form of `bench/faults.py`: two API processes behind the
real gateway with two stand-in worker processes, PostgreSQL and Redis, under a fixed-rate load of four keys
(one over its own limit), while an API worker is SIGKILLed (serve replaces it), a stand-in is SIGKILLed and
started again, and Redis is restarted.

What must hold: no 5xx and no unanswered request outside the fault windows; serve runs on through its
worker's SIGKILL, /health then reports 2 workers up and 1 replaced, and at least 90 % of the requests sent
until the replacement answers get an answer (the other worker's); every answer stored except at
most the SIGKILLed worker's batch (and every answer stored after serve's SIGTERM shutdown); the noisy key
never gets more than its limit in a limiter window (counted apart before and after Redis lost its counts);
the other keys keep ≥ 95 % of their answers outside the fault windows and get no 429 at all.

The database's faults (`bench/faults_database.py`, issue 41), short: `serve --workers 2` on PostgreSQL through a TCP
proxy under steady load, the proxy frozen 10 s, then killed for 15 s and started again, then serve and all its
processes SIGKILLed and started again. What must hold: no 5xx; p99 while frozen within 3x the control's; serve and
its workers never restarted by the database's faults; every answered evaluation stored with its status; at most one
database warning per process per outage, each with its closing line.
"""

from __future__ import annotations

import pytest

from bench.faults import NOISY, Plan, faults_run
from bench.faults_database import DatabasePlan, database_faults_run

pytestmark = pytest.mark.servers

PLAN = Plan(
    quiet_seconds=2,
    phase_seconds=4,
    steady_keys=3,
    rate=3,
    noisy_rate=3,
    noisy_limit=30,
    down_seconds=1,
    drain_seconds=3,
)
"""About 40 s of load at 12 requests/s; the noisy key sends 180 a minute against its 30."""


def test_faults_keep_answers_stored_and_keys_within_their_limits(tmp_path):
    run = faults_run(plan=PLAN, workdir=tmp_path, progress=print)
    report = "\n".join(run.lines())

    assert run.problems() == [], report
    assert run.kill_status is None, report  # serve ran on: its SIGKILLed worker was replaced
    assert run.kill_workers == {"up": 2, "configured": 2, "replaced": 1}, report
    assert run.stop_status == 0, report
    assert [w.name for w in run.windows] == [
        "API worker SIGKILL, replaced",
        "stand-in SIGKILL and restart",
        "Redis restart",
    ], report
    noisy = [s for s in run.results if s.caller == NOISY]
    assert any(s.status == 429 for s in noisy), report  # the limit was really reached


DATABASE_PLAN = DatabasePlan(phase_seconds=6, freeze_seconds=10, down_seconds=15, keys=2, rate=4, drain_seconds=5)
"""About 50 s of load at 8 requests/s around the faults, and serve's restart (the bench runs the 60 s outage)."""


def test_database_faults_stall_no_request_and_lose_no_answered_evaluation(tmp_path):
    run = database_faults_run(plan=DATABASE_PLAN, workdir=tmp_path, progress=print)
    report = "\n".join(run.lines())

    assert run.problems() == [], report
    assert [w.name for w in run.windows] == [
        "control",
        "database frozen",
        "database killed and started again",
        "serve SIGKILLed and started again",
    ], report
    assert len(run.evaluated()) > 0.8 * len([s for s in run.results if s.status]), report
    assert sum(run.warnings_per_outage()[1].values()) >= 1, report  # the outage was noticed, and logged once
