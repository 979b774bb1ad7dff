"""Scoring defaults per served model, as measured by `bench/quality.py` (see the README's quality table).

A model's temperature is fitted by cross-validated log loss on the bench's labelled items, so its
probabilities mean roughly what they say; debiasing is on where it raised the bench's accuracy.
A model that was never measured gets temperature 1 and no debiasing: nothing is assumed about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class Tuning:
    temperature: float
    debias: bool


UNMEASURED = Tuning(temperature=1.0, debias=False)

TUNINGS = MappingProxyType({
    # bench/quality.py --n 100: raw answers put every IMDB review on one side (47 %); debiased 69-72 %.
    "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF:q4_k_m": Tuning(temperature=0.165, debias=True),
    # bench/quality.py --n 100 (docs/quality.md): debiasing took BoolQ from 64 % to 75 % and MMLU from
    # 39 % to 44 % with IMDB at 93-96 % either way; the temperature is fitted on the debiased answers.
    "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:q4_k_m": Tuning(temperature=0.417, debias=True),
})


def tuning_for(*, model: str) -> Tuning:
    return TUNINGS.get(model, UNMEASURED)
