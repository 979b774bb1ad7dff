"""Per-question calibration of served answers: a temperature, optionally per-option biases.

The global temperature (`inference.tuning`) fits one model over many tasks; a question asked
thousands of times deserves its own fit. Calibration works on the *served* distribution (after
debiasing and the global temperature), so it composes with whatever produced it and can be fitted
from stored answers alone: p' = softmax(a · log p + b), with a = 1/T. Temperature scaling fits `a`
only (it never changes which option wins); vector scaling (Guo et al. 2017) adds a bias per option,
which can also correct a question that leans to one option. The log loss is convex in (a, b), so a
damped Newton method finds the optimum in a few steps; a small ridge on b keeps it finite when
labels are few or one option is never the true one.

Fits are judged on a held-out split the fit never saw, so the report says whether calibration
actually helps before anyone switches it on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from inference.calibration import T_MAX, T_MIN
from inference.metrics import LOG_FLOOR, Metrics, Scored, metrics_compute, reliability_bins
from inference.questions import Question
from inference.scoring import Answer, ConfidenceFormula, confidence_of, probabilities_served

RIDGE = 1e-2
"""L2 penalty on the biases, per item: pins softmax's free constant and tames options seldom labelled."""
HELD_OUT_SHARE = 0.3
SPLIT_SEED = 16
NEWTON_STEPS = 50


@dataclass(frozen=True)
class Calibrator:
    """What serving applies to one question's served probabilities."""

    temperature: float
    biases: tuple[float, ...] | None = None
    """Per option in the question's order (vector scaling); None for temperature scaling only."""
    ref: int | None = None
    """The stored calibration this is (its id), recorded on the answers it calibrates."""


@dataclass(frozen=True)
class FitReport:
    """How a fit did: sizes, and the held-out split's metrics and reliability bins before and after."""

    n: int
    n_fit: int
    n_held_out: int
    before: Metrics
    after: Metrics
    reliability_before: list[tuple[float, float, int]]
    reliability_after: list[tuple[float, float, int]]


def question_key(*, question: Question) -> str:
    """The identity of a question for calibration: type, instructions and ordered options, not its id
    (callers reuse ids such as "q" for unrelated questions, and reword questions under one id); instructions
    that hold images add their parts, each image by its digest (`Question.identity`), so a text-only question's
    key is what it always was."""
    return _identity_hash(*question.identity)


@functools.lru_cache(maxsize=4096)
def _identity_hash(
    kind: str,
    instructions: str | None,
    options: tuple[tuple[str, str], ...],
    layout: tuple[str | tuple[str], ...] = (),
) -> str:
    """Cached: every stored answer has a key, and callers ask the same questions again and again (the
    JSON and the hash were a fifth of the storage writer's CPU on 64-question evaluations)."""
    identity: list[object] = [kind, instructions, [list(option) for option in options]]
    if layout:
        identity.append([part if isinstance(part, str) else {"image": part[0]} for part in layout])
    text = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def probabilities_calibrate(*, probabilities: Sequence[float], calibrator: Calibrator) -> tuple[float, ...]:
    """softmax(log p / T + b); an option served with probability 0 stays (nearly) impossible."""
    logits = [math.log(max(p, LOG_FLOOR)) / calibrator.temperature for p in probabilities]
    if calibrator.biases is not None:
        logits = [z + b for z, b in zip(logits, calibrator.biases, strict=True)]
    top = max(logits)
    weights = [math.exp(z - top) for z in logits]
    total = math.fsum(weights)
    return tuple(w / total for w in weights)


def answer_calibrate(*, answer: Answer, calibrator: Calibrator, confidence: ConfidenceFormula) -> Answer:
    """The answer as calibrated, keeping what it was before (`uncalibrated`) and which calibration did it."""
    p = probabilities_served(probabilities_calibrate(probabilities=answer.probabilities, calibrator=calibrator))
    return replace(
        answer,
        probabilities=p,
        uncalibrated=answer.probabilities,
        calibration=calibrator.ref,
        confidence=confidence_of(question=answer.question, p=p, formula=confidence),
    )


def split_held_out(*, count: int, seed: int = SPLIT_SEED) -> tuple[list[int], list[int]]:
    """(fit, held-out) indices: a seeded shuffle, so refitting the same labels gives the same split."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    held = max(1, round(count * HELD_OUT_SHARE))
    return sorted(order[held:]), sorted(order[:held])


def _loss_grad_hessian(
    params: np.ndarray, z: np.ndarray, y: np.ndarray, vector: bool
) -> tuple[float, np.ndarray, np.ndarray]:
    """Penalised mean log loss of softmax(a·z + b) with its gradient and Hessian in (a, b...)."""
    n, k = z.shape
    a, b = params[0], (params[1:] if vector else np.zeros(k))
    logits = a * z + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = -float(np.mean(np.log(np.maximum(p[np.arange(n), y], LOG_FLOOR))))
    onehot = np.zeros_like(p)
    onehot[np.arange(n), y] = 1.0
    r = p - onehot
    # Jacobian of the logits per item: d/da = z, d/db_j = e_j.
    jac = np.concatenate([z[:, :, None], np.broadcast_to(np.eye(k), (n, k, k))], axis=2) if vector else z[:, :, None]
    grad = np.einsum("nk,nkp->p", r, jac) / n
    cov = np.einsum("nk,kl->nkl", p, np.eye(k)) - np.einsum("nk,nl->nkl", p, p)
    hess = np.einsum("nkp,nkl,nlq->pq", jac, cov, jac) / n
    if vector:
        loss += RIDGE * float(b @ b) / 2
        grad[1:] += RIDGE * b
        hess[1:, 1:] += RIDGE * np.eye(k)
    return loss, grad, hess


def calibrator_fit(*, items: Sequence[Scored], vector: bool) -> Calibrator:
    """The calibrator minimising the items' log loss: damped Newton steps, a kept within [1/T_MAX, 1/T_MIN]."""
    z = np.log(np.maximum(np.array([i.probabilities for i in items], dtype=float), LOG_FLOOR))
    y = np.array([i.label for i in items])
    params = np.zeros(1 + (z.shape[1] if vector else 0))
    params[0] = 1.0
    loss, grad, hess = _loss_grad_hessian(params, z, y, vector)
    for _ in range(NEWTON_STEPS):
        step = np.linalg.solve(hess + 1e-9 * np.eye(len(params)), grad)
        scale = 1.0
        while scale > 1e-6:
            trial = params - scale * step
            trial[0] = min(max(trial[0], 1 / T_MAX), 1 / T_MIN)
            trial_loss, trial_grad, trial_hess = _loss_grad_hessian(trial, z, y, vector)
            if trial_loss <= loss:
                break
            scale /= 2
        else:
            break
        converged = loss - trial_loss < 1e-12
        params, loss, grad, hess = trial, trial_loss, trial_grad, trial_hess
        if converged:
            break
    biases = tuple(float(x - params[1:].mean()) for x in params[1:]) if vector else None
    return Calibrator(temperature=float(1 / params[0]), biases=biases)


def scored_calibrate(*, items: Sequence[Scored], calibrator: Calibrator) -> list[Scored]:
    return [
        Scored(
            probabilities=probabilities_calibrate(probabilities=i.probabilities, calibrator=calibrator), label=i.label
        )
        for i in items
    ]


def calibration_fit(*, items: Sequence[Scored], vector: bool) -> tuple[Calibrator, FitReport]:
    """Fit on the seeded fit split and report both splits' sizes and the held-out metrics before/after."""
    fit_ix, held_ix = split_held_out(count=len(items))
    calibrator = calibrator_fit(items=[items[i] for i in fit_ix], vector=vector)
    held = [items[i] for i in held_ix]
    after = scored_calibrate(items=held, calibrator=calibrator)
    return calibrator, FitReport(
        n=len(items),
        n_fit=len(fit_ix),
        n_held_out=len(held_ix),
        before=metrics_compute(items=held),
        after=metrics_compute(items=after),
        reliability_before=reliability_bins(items=held),
        reliability_after=reliability_bins(items=after),
    )
