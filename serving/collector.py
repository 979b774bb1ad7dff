"""The garbage collector set for a long-running API process.

Everything loaded before serving (Django, the URL resolver, the tokenizer's Python side, the labels,
caches warmed at startup) lives as long as the process, yet CPython's cyclic collector would walk it
again in every full collection; and each 64-question evaluation allocates a few thousand containers
(the backend's batched answer alone), so with the default thresholds (700, 10, 10) collections ran
several times per request. Measured with `bench/server.py --store off` (server CPU ms per evaluation
in bursts; p99 at concurrency 16):

| collector | R3 CPU | R3 p99 | R64 CPU |
|---|---|---|---|
| default | 1.98 | 117 ms | 7.34 |
| startup objects frozen | 1.60 | 45 ms | 6.41 |
| frozen, thresholds (20000, 20, 20) | 1.70 | 45 ms | 5.94 |

Request garbage is still collected (the thresholds only make collections rarer), so memory stays
bounded; `gc.freeze` is what the standard library documents for exactly this (long-lived objects
created before serving).
"""

from __future__ import annotations

import gc

THRESHOLDS = (20_000, 20, 20)


def collector_tune() -> None:
    """Collect once, move every surviving object out of the collector's reach, and make collections of
    request garbage rarer. Call when the process is ready to serve, before the first request."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
