"""SAMPLE: which slots of a period OptStream measures (ES, or L1-based with SVT, Alg. 3).

Indexes here are 0-based (slot ``i`` of a period is the paper's ``i + 1``).
"""

from __future__ import annotations

import numpy as np

from app.dp.noise import NoiseKind, ScalarNoise
from app.dp.types import FloatArray, IntArray


def equally_spaced(w: int, k: int) -> IntArray:
    """ES: ``k`` slots of ``w``, chosen without looking at the data (spec §2.4, ``eps_s = 0``).

    ``unique(round(linspace(1, w, k)))``, which holds the first and the last slot.

    >>> (equally_spaced(48, 10) + 1).tolist()  # spec §2.4: the paper's 1-based indexes
    [1, 6, 11, 17, 22, 27, 32, 38, 43, 48]
    """
    if k >= w:
        return np.arange(w, dtype=np.int64)
    return np.unique(np.round(np.linspace(1, w, k)).astype(np.int64)) - 1


def segment_l1(x: FloatArray, a: int, b: int) -> float:
    """``L1^[a,b]`` (Eq. 3) summed over the columns of ``x`` (``(w, d)``): the L1 distance of
    slots ``a..b`` from the line through ``x[a]`` and ``x[b]``.

    >>> segment_l1(np.array([[0.0], [5.0], [2.0]]), 0, 2)
    4.0
    """
    if b - a < 2:
        return 0.0
    lam = (np.arange(a, b + 1) - a)[:, None] / (b - a)
    line = x[a] + lam * (x[b] - x[a])
    return float(np.abs(line - x[a : b + 1]).sum())


def l1_sensitivity(delta: float, w: int, k: int) -> float:
    """``Delta_L = 2 Delta (w - k)`` (Thm 6 with the longest queried segment ``w - k``)."""
    return 2.0 * delta * (w - k)


def l1_sample(
    x: FloatArray,
    k: int,
    eps: float,
    theta: float,
    delta: float,
    rng: np.random.Generator,
    *,
    noise: NoiseKind,
) -> IntArray:
    """SAMPLE_L1 (Alg. 3, spec §2.5 with the "reserve the last slot" resolution).

    SVT over the segment scores ``L1^[tp, i]`` (true data, summed over the ``d`` columns):
    a positive answer selects slot ``i``. Slot 0 is always selected, slot ``w - 1`` is
    reserved, and when only as many slots remain as samples are missing they are all taken,
    so exactly ``min(k, w)`` slots are returned.

    Privacy: ``eps``-DP (Thm 7). The threshold noise ``rho ~ Lap(2 Delta_L / eps)`` is drawn
    once per call, each query gets ``Lap(4 k Delta_L / eps)`` and at most ``k - 2`` answers are
    positive. Summing the scores over columns keeps ``Delta_L``: at every interior slot the
    line moves by a convex combination of its endpoints' changes, so a slot's term moves by at
    most ``2 Delta`` in total over the columns when one slot's histogram moves by ``Delta``
    in L1. With ``geometric`` noise the threshold and the scores are floored onto one grid and
    the noises are discrete Laplace in its steps (:class:`~app.dp.noise.ScalarNoise`): the
    same argument on the integers.
    """
    w = x.shape[0]
    if k >= w:
        return np.arange(w, dtype=np.int64)
    svt = ScalarNoise(noise, l1_sensitivity(delta, w, k))
    threshold = svt.add(rng, theta, eps, 2)  # Alg. 1 l.1: rho drawn once, Lap(2 Delta_L / eps)
    chosen = [0]  # Alg. 3 l.1
    last = 0
    target = k - 1  # the last slot is reserved (spec §2.5 resolution)
    for i in range(1, w - 1):  # Alg. 3 l.3
        if len(chosen) >= target:  # l.10
            break
        # l.4-5: mu ~ Lap(4 k Delta_L / eps) on the score
        if svt.add(rng, segment_l1(x, last, i), eps, 4 * k) >= threshold:
            chosen.append(i)  # l.6
            last = i  # l.7
        if (w - 2) - i <= target - len(chosen):  # l.8: too few slots left, take them all
            chosen.extend(range(i + 1, w - 1))  # l.9 (typo fixed: i < j)
            break
    chosen.append(w - 1)
    return np.array(chosen, dtype=np.int64)
