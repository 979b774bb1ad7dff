"""Cost that grows linearly with a client's input: the check behind every hostile-input test.

A stall is proven absent by the work done, not by wall-clock time on a shared machine: the same work is run on
an input of size `n` and of size `factor * n`, and the CPU time of this thread (which other processes and
threads do not inflate) must grow about `factor` times, not `factor ** 2`. Each measurement repeats the work
until it has taken a few milliseconds, so a fast function is timed above the clock's noise, and keeps the best
of several rounds, so a cache miss or a page fault does not decide.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

Work = Callable[[int], Callable[[], object]]
"""`work(size)` builds an input of `size` (not timed) and returns what to time on it."""

MEASURE_SECONDS = 0.004
ROUNDS = 5


def _seconds(run: Callable[[], object]) -> float:
    """CPU seconds of one `run()`, from as many repetitions as take `MEASURE_SECONDS`, best of `ROUNDS`."""
    repeat = 1
    while True:
        start = time.thread_time()
        for _ in range(repeat):
            run()
        spent = time.thread_time() - start
        if spent >= MEASURE_SECONDS or repeat >= 1 << 16:
            break
        repeat *= 4
    best = spent / repeat
    for _ in range(ROUNDS - 1):
        start = time.thread_time()
        for _ in range(repeat):
            run()
        best = min(best, (time.thread_time() - start) / repeat)
    return best


def cost_growth(work: Work, *, size: int, factor: int = 8) -> float:
    """How many times more CPU `work` takes on an input `factor` times larger. The cyclic garbage collector is
    paused meanwhile: its passes cost in proportion to everything the test process holds, not to the input."""
    small, large = work(size), work(size * factor)
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        return _seconds(large) / max(_seconds(small), 1e-9)
    finally:
        if collecting:
            gc.enable()


ATTEMPTS = 3


def assert_linear(work: Work, *, size: int, factor: int = 8) -> None:
    """`work`'s cost grows at most about linearly from `size` to `factor * size`: under `factor * 3` (a
    quadratic cost grows `factor ** 2` = 64 times, linear 8, and a log factor stays far below 24). A machine
    busy with other work can inflate one measurement, so up to `ATTEMPTS` are made: a quadratic cost would need
    every one of them to come in at a third of its growth to pass."""
    growths = []
    for _ in range(ATTEMPTS):
        growths.append(cost_growth(work, size=size, factor=factor))
        if growths[-1] < factor * 3:
            return
    raise AssertionError(f"the cost grew {min(growths):.1f} times (at best) for an input {factor} times larger")
