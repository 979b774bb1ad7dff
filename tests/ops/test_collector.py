"""The serving process's garbage collector: startup objects frozen, request garbage still collected."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from serving.collector import THRESHOLDS, collector_tune


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_tuning_freezes_what_exists_and_still_collects_later_cycles(collector):
    collector_tune()
    assert gc.get_freeze_count() > 1000  # Django, the tests' modules: everything loaded so far
    assert gc.get_threshold() == THRESHOLDS
    Cycle()
    assert gc.collect() >= 1  # a cycle made after startup (a request's) is garbage like before
