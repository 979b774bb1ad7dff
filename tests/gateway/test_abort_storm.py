"""The abort storm of issue 11: 16 clients hang up at once on the 64-question request (any load balancer
timeout does this). Cancelling must cost less than the work it cancels: the admission slots come free
at once and the next request answers 200 within a second, on a bare SGLang and behind the gateway."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from fake_sglang import FakeSGLang
from serving.evaluator import evaluator_install
from testbed.evaluators import url_evaluator
from testbed.live_server import LiveServer
from testbed.smg import wait_until
from tests.conftest import README_REQUEST

pytestmark = pytest.mark.servers

CLIENTS = 16
BRANCH_SECONDS = 6.0
QUESTIONS = 64
BODY = {
    **README_REQUEST,
    "questions": {
        f"q{i}": {"type": "noul", "instructions": f"Is point {i} of the ticket true?"} for i in range(QUESTIONS)
    },
}


def request_send(*, port: int, body: dict[str, object]) -> socket.socket:
    """A client that sends a whole request and then waits, until the test hangs up on its behalf."""
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(head + payload)
    return client


def branches_in_flight(workers: tuple[FakeSGLang, FakeSGLang], branch_mode: str) -> bool:
    """Every evaluation past its warm-up, its branches waiting on the workers (parallel mode: as many
    as the process-wide cap of 64 lets through)."""
    calls = sum(w.generate_calls for w in workers)
    waiting = sum(w.waiting_calls for w in workers)
    if branch_mode == "batched":
        return calls >= 2 * CLIENTS and waiting >= CLIENTS
    return calls >= CLIENTS + 64 and waiting >= 64


@pytest.mark.parametrize("target", ["sglang", "gateway"])
def test_sixteen_clients_cut_off_mid_request_leave_the_server_free_at_once(target, branch_mode, workers, request):
    url = request.getfixturevalue("live_gateway").url if target == "gateway" else workers[0].url
    evaluator = url_evaluator(url, branch_mode=branch_mode)
    evaluator_install(evaluator)
    try:
        with LiveServer() as server:
            for worker in workers:
                # Long enough that no branch in flight when the clients hang up has run out its delay by
                # then, however slowly the 16 evaluations reached their branches (a 0.5 s delay once let
                # the earliest branch finish first on a loaded machine: 63 cut of 64).
                worker.delay = BRANCH_SECONDS
            clients = [request_send(port=server.port, body=BODY) for _ in range(CLIENTS)]
            wait_until(lambda: branches_in_flight(workers, branch_mode), timeout=30, what="16 evaluations' branches")
            gate = evaluator.gate
            assert gate.active == CLIENTS
            hung_up = time.monotonic()
            for client in clients:
                client.close()
            for worker in workers:
                worker.delay = 0  # what is measured is the server's own readiness for the next request
            # The server learns of each hang-up from its socket, a moment after close(): a request sent in
            # that moment is rightly refused (529), so the slots are watched coming free, and the time from
            # the hang-up to the next request's 200 is what must be short. Slots still held by the cut
            # evaluations would hold it for their branches' delay.
            wait_until(lambda: gate.active == 0, timeout=BRANCH_SECONDS / 3, what="the cut evaluations' slots")
            response = httpx.post(server.url + "/v1/systemone", json=BODY, timeout=30)
            elapsed = time.monotonic() - hung_up
            assert response.status_code == 200, response.text
            assert elapsed < BRANCH_SECONDS / 3
            for worker in workers:
                worker.wait_idle(BRANCH_SECONDS / 2)  # the cut branches ended on the workers, not by their delay
            assert sum(len(w.disconnected) for w in workers) >= (CLIENTS if branch_mode == "batched" else 64)
            assert all(w.aborted == [] for w in workers)  # no /abort_request storm
    finally:
        evaluator_install(None)
