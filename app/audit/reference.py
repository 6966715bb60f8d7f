"""Correct reference mechanisms, vectorized, to measure the auditor's own false-positive rate.

:func:`laplace_case` is an audit case for the textbook Laplace mechanism on one count (add/remove
of one user, sensitivity 1, budget ``eps``), sampled with numpy in one draw per side. It is
exactly ``eps``-DP and tight (the event ``x >= c + 1`` has ratio exactly ``e**eps``), the hardest
correct mechanism for an auditor. :func:`geometric_case` is the same count with the service's
discrete Laplace noise, audited like a worst-case case (:mod:`app.audit.tight`: the claim is the
true loss, the event a threshold on the likelihood-ratio statistic alone); every event ``x >= c +
1 + j`` has ratio exactly ``e**eps`` there. :func:`false_positive_rate` audits a case with many
seeds and returns the fraction of "violations": with exact Clopper-Pearson bounds on a
pre-registered event this is at most ``alpha``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from app.audit.features import STATUS_CODES, Runs, central_features, pattern_label
from app.audit.runners import Case, Progress
from app.audit.verdict import audit_case
from app.dp.noise import two_sided_geometric
from app.dp.types import Group

BASE = 10.0
"""The other users' count in the reference cell."""


def laplace_case(eps: float = 1.0) -> Case:
    """Audit case of ``BASE + target + Lap(1/eps)`` (one slot, one cell)."""

    def run(side: str, trials: int, rng: np.random.Generator, progress: Progress) -> Runs:
        count = BASE + (1.0 if side == "A" else 0.0)
        hist = count + rng.laplace(0.0, 1.0 / eps, (trials, 1, 1))
        progress(trials)
        return Runs(hist, np.full((trials, 1), STATUS_CODES["publish"], dtype=np.int64))

    mid, delta = np.array([[BASE + 0.5]]), np.array([[1.0]])
    return Case(
        "laplace-reference",
        "central",
        "add/remove",
        "steady",
        0,
        Group(1, eps),
        1,
        1,
        run,
        lambda runs: central_features(runs, mid, delta),
        lambda code: pattern_label(code, 1),
    )


def geometric_case(eps: float = 1.0) -> Case:
    """Audit case of ``BASE + target + DL(exp(-eps))``, claimed at ``eps``, judged on the
    likelihood-ratio statistic alone (the worst-case cases' rule)."""

    def run(side: str, trials: int, rng: np.random.Generator, progress: Progress) -> Runs:
        count = BASE + (1.0 if side == "A" else 0.0)
        hist = count + two_sided_geometric(rng, eps, trials).reshape(trials, 1, 1).astype(
            np.float64
        )
        progress(trials)
        return Runs(hist, np.full((trials, 1), STATUS_CODES["publish"], dtype=np.int64))

    return dataclasses.replace(
        laplace_case(eps), mechanism="geometric-reference", run=run, statistic="loss_stat"
    )


def false_positive_rate(
    seeds: int, trials: int, eps: float = 1.0, alpha: float = 0.05, case: Case | None = None
) -> tuple[float, list[float]]:
    """The fraction of ``seeds`` audits of ``case`` (default :func:`laplace_case`) reporting a
    violation of ``eps``, and every lower bound found."""
    case = laplace_case(eps) if case is None else case
    bounds = []
    for seed in range(seeds):
        v = audit_case(case, trials, alpha, np.random.default_rng(seed), lambda k: None)
        bounds.append(float(v.lower_bound or 0.0))
    return float(np.mean([b > eps for b in bounds])), bounds
