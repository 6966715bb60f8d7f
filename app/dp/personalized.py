"""The PWSM building blocks: OBS (Alg. 1), the Sampling Mechanism, and dissimilarity (Alg. 3).

Paper: L. Du et al., *Infinite Stream Estimation under Personalized w-Event Privacy*, PVLDB
18(6):1905-1918, 2025, §3-§4; the Sampling Mechanism is Jorgensen, Yu and
Cormode, ICDE 2015. Reading aid: ``docs/specs/seed-000-pwsm.md`` §2.1-§2.4, §2.12.

Everything here works on requirement groups, never on users: a group ``g`` holds ``n_g`` users
with the same budget ``b_g``, and the slot's data is the ``(m, d)`` matrix of users of group
``g`` holding value ``j``. Per-user Bernoulli sampling of SM_s is exactly binomial thinning of
these counts (spec §2.12), so the cost per slot is ``O(m * d)``, independent of the number of
users.

Budgets enter as exact :class:`~fractions.Fraction` values so that OBS groups equal budgets by
equality (spec A5, A11); they become floats only inside ``expm1`` and noise scales.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from app.dp.noise import NoiseKind, perturb
from app.dp.types import FloatArray, IntArray


def obs(budgets: Sequence[Fraction], population: Sequence[int]) -> tuple[Fraction, float]:
    """Optimal Budget Selection (Alg. 1): the threshold ``theta`` minimising ``err_s + err_dp``.

    ``budgets[g]`` is the budget of each of the ``population[g]`` users of group ``g``. Distinct
    positive budgets are the candidates, scanned in ascending order with a strict ``<`` so ties
    go to the smaller budget (spec A5). ``err_s`` (Def. 6) is the variance plus squared bias of
    the *total* sampled count (spec A6); ``err_dp = 2 / theta**2`` (Def. 7). Groups with no users
    are ignored; if no positive budget has users, the largest budget is returned with pure
    noise error (there is nobody to sample).

    Example 2 of the paper (spec A4, T1): the candidate 0.8 costs 27.733, not the printed 89.74.

    >>> theta, err = obs([Fraction(1, 10), Fraction(2, 5), Fraction(4, 5)], [2, 5, 3])
    >>> theta, round(err, 4)
    (Fraction(2, 5), 15.3084)
    """
    merged: dict[Fraction, int] = {}
    for b, n in zip(budgets, population, strict=True):
        if b > 0 and n > 0:
            merged[b] = merged.get(b, 0) + int(n)
    if not merged:
        top = max(budgets)
        return top, 2.0 / float(top) ** 2
    cand = sorted(merged)
    errors = obs_errors(cand, [merged[b] for b in cand])
    best = int(np.argmin(errors))  # argmin returns the first minimum: ties to the smaller budget
    return cand[best], float(errors[best])


def obs_errors(candidates: Sequence[Fraction], counts: Sequence[int]) -> FloatArray:
    """``err_s(theta) + err_dp(theta)`` for every candidate threshold (ascending, distinct).

    >>> obs_errors([Fraction(1, 10), Fraction(2, 5), Fraction(4, 5)], [2, 5, 3]).round(3)
    array([200.   ,  15.308,  27.733])
    """
    e = np.array([float(b) for b in candidates])
    n = np.asarray(counts, dtype=np.float64)
    # p[k, i]: probability that a user of budget e[i] is sampled at threshold e[k] (i < k).
    p = np.expm1(e)[None, :] / np.expm1(e)[:, None]
    below = np.tri(len(e), k=-1, dtype=bool)  # below[k, i] = i < k
    p = np.where(below, p, 1.0)
    variance = (n * p * (1.0 - p)).sum(axis=1)
    bias = (n * (1.0 - p)).sum(axis=1)
    return np.asarray(variance + bias**2 + 2.0 / e**2, dtype=np.float64)


def sampling_probabilities(budgets: Sequence[Fraction], theta: Fraction) -> FloatArray:
    """SM_s's inclusion probability per group: 1 at or above ``theta``, else amplified.

    A user of budget ``b < theta`` is kept with ``(e**b - 1) / (e**theta - 1)``, so its privacy
    loss ``ln(1 + pi (e**theta - 1))`` is exactly ``b``; a zero budget is never sampled.

    >>> sampling_probabilities([Fraction(1, 10), Fraction(2, 5), Fraction(0)], Fraction(2, 5))
    array([0.21383822, 1.        , 0.        ])
    """
    denom = math.expm1(float(theta))
    return np.array(
        [1.0 if b >= theta else (math.expm1(float(b)) / denom if b > 0 else 0.0) for b in budgets],
        dtype=np.float64,
    )


def sample(counts: IntArray, pi: FloatArray, rng: np.random.Generator) -> IntArray:
    """SM_s + Q: the histogram of the sampled users, by binomial thinning of each group's counts.

    Thinning ``counts[g, j]`` with ``pi[g]`` has the same law as keeping each user independently
    (spec §2.12). The sampled counts are not rescaled by ``1 / pi`` (spec A7).
    """
    thinned = rng.binomial(counts, pi[:, None])
    return np.asarray(thinned.sum(axis=0), dtype=np.int64)


def sampling_mechanism(
    counts: IntArray,
    budgets: Sequence[Fraction],
    theta: Fraction,
    noise: NoiseKind,
    rng: np.random.Generator,
) -> FloatArray:
    """SM = SM_d(Q(SM_s(D, budgets, theta)), theta): a fresh release, ``budgets``-personal DP."""
    sampled = sample(counts, sampling_probabilities(budgets, theta), rng)
    return perturb(noise, rng, sampled.astype(np.float64), float(theta))


def dissimilarity(
    counts: IntArray,
    budgets: Sequence[Fraction],
    population: Sequence[int],
    last_release: FloatArray,
    noise: NoiseKind,
    rng: np.random.Generator,
) -> float:
    """DC (Alg. 3): the noisy mean absolute deviation of the sampled slot from the last release.

    ``theta1 = OBS(budgets)`` (l.1); the slot is sampled at ``theta1`` (l.2);
    ``dis* = (1/d) sum_j |c~[j] - r_l[j]|`` (l.4) has sensitivity ``1/d`` under add/remove
    (spec A2, A18), so ``dis = dis* + Lap(1 / (d theta1))`` (l.5). Geometric noise is added to
    the integer sum before the division, which is the same calibration.
    """
    theta, _ = obs(budgets, population)
    sampled = sample(counts, sampling_probabilities(budgets, theta), rng)
    deviation = np.abs(sampled - last_release).sum(keepdims=True)
    noisy: FloatArray = perturb(noise, rng, deviation.astype(np.float64), float(theta))
    return float(noisy[0]) / int(counts.shape[1])
