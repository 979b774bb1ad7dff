"""What counting per-key limits costs the API process alone: process CPU per evaluation of 16 concurrent
`request_admitted` blocks (all three limits set, none reached, 400 input tokens reserved and counted each),
minus the same blocks with no limit set. Redis must be running on 127.0.0.1:6379 (database 3 is used).

    .venv/bin/python bench/ratelimits.py                 # 3,200 evaluations, best of 3
    .venv/bin/python bench/ratelimits.py --evaluations 16000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openjev_site.settings")
import django

django.setup()

from django.conf import settings  # noqa: E402

from api.ratelimits import request_admitted  # noqa: E402

CONCURRENCY = 16


async def evaluation_limited() -> None:
    async with request_admitted(caller=None, address="127.0.0.1") as admission:
        await admission.tokens_reserve(400)
        await asyncio.sleep(0)
        admission.tokens_used(400)


async def cpu_per_evaluation(*, evaluations: int) -> float:
    """Best of 3, in ms."""
    runs = []
    for _ in range(3):
        cpu = time.process_time()
        for _ in range(evaluations // CONCURRENCY):
            await asyncio.gather(*(evaluation_limited() for _ in range(CONCURRENCY)))
        runs.append((time.process_time() - cpu) / evaluations * 1000)
    return min(runs)


def limits_set(*, on: bool) -> None:
    settings.OPENJEV = replace(
        settings.OPENJEV,
        redis_url="redis://127.0.0.1:6379/3",
        key_requests_per_minute=10**9 if on else None,
        key_tokens_per_minute=10**12 if on else None,
        key_concurrency=10**6 if on else None,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evaluations", type=int, default=3200)
    args = parser.parse_args()
    limits_set(on=True)
    await cpu_per_evaluation(evaluations=CONCURRENCY * 4)  # connections opened, scripts loaded
    counted = await cpu_per_evaluation(evaluations=args.evaluations)
    limits_set(on=False)
    floor = await cpu_per_evaluation(evaluations=args.evaluations)
    print(f"limits in Redis {counted:.3f} ms/evaluation, none {floor:.3f}: counting costs {counted - floor:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
