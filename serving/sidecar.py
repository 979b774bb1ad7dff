"""A process `serve` keeps running beside the API (the batch worker), started again when it dies.

With the API workers' backoff (`serving.workers`): a process that exits without being asked to (the OOM killer's
SIGKILL, a crash, even a clean exit) is started again after `RestartPolicy.backoff_first` seconds, doubled for each
further death within the window. More than `RestartPolicy.deaths_max` deaths within `RestartPolicy.window` seconds
is a crash loop, logged as one; unlike a crash loop of API workers it does not stop `serve`: interactive requests
need no batch worker (with storage off, not even a database), so the sidecar rests a whole window and tries again,
which also heals by itself once the cause is gone (the database back, migrations applied by another replica).

The process is launched, watched and stopped from one thread of its own: Linux sends the parent-death signal when
the thread that forked a child ends, not its process, so the thread lives exactly as long as the process it keeps,
and `serve` killed outright (SIGKILL, OOM) takes the process down with it. No Django here.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from serving.supervisor import parent_death_signal, process_group_stop, process_launch, returncode_describe
from serving.workers import POLL_SECONDS, RestartPolicy, restart_delay

log = logging.getLogger("openjev.serve")


@dataclass
class Sidecar:
    """`argv` kept running from `start` to `stop`."""

    argv: Sequence[str]
    name: str
    """What the log calls it ("batch worker")."""
    policy: RestartPolicy
    grace: float
    """Seconds it gets after SIGTERM before SIGKILL, when stopped."""
    restarts: int = 0
    rests: int = 0
    """Crash loops it has rested after."""
    process: subprocess.Popen[bytes] | None = None
    """The process running now (or last)."""
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._keep, name=f"openjev-{self.name.replace(' ', '-')}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the process (SIGTERM, SIGKILL after `grace`) and its keeping; returns once both are done."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def _keep(self) -> None:
        deaths: list[float] = []
        try:
            while not self._stopping.is_set():
                self.process = process_launch(argv=self.argv, preexec=parent_death_signal())
                code = self._exit_wait(process=self.process)
                if code is None:
                    return
                now = time.monotonic()
                deaths = [*(t for t in deaths if now - t < self.policy.window), now]
                delay = self._delay_after(code=code, deaths=len(deaths))
                if len(deaths) > self.policy.deaths_max:
                    deaths = []
                    self.rests += 1
                if self._stopping.wait(delay):
                    return
                self.restarts += 1
        finally:
            if self.process is not None:
                process_group_stop(process=self.process, grace=self.grace)

    def _exit_wait(self, *, process: subprocess.Popen[bytes]) -> int | None:
        """The process's status once it exits; None when asked to stop first."""
        while not self._stopping.wait(POLL_SECONDS):
            code = process.poll()
            if code is not None:
                return code
        return None

    def _delay_after(self, *, code: int, deaths: int) -> float:
        """How long to wait before starting it again after a death, the `deaths`th within the window; logged."""
        assert self.process is not None
        crash_loop = deaths > self.policy.deaths_max
        delay = self.policy.window if crash_loop else restart_delay(policy=self.policy, deaths=deaths)
        log.error(
            "the %s (pid %d) exited with %s, %d deaths within %.0f s%s: starting it again in %.1f s",
            self.name,
            self.process.pid,
            returncode_describe(returncode=code),
            deaths,
            self.policy.window,
            f" (a crash loop: more than {self.policy.deaths_max})" if crash_loop else "",
            delay,
        )
        return delay
