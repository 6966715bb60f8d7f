"""Exact binomial confidence bounds and the privacy-loss lower bound they give.

An event ``E`` of a mechanism's output that occurs ``k_a`` times in ``n_a`` runs on input ``A``
and ``k_b`` times in ``n_b`` runs on the neighbouring input ``B`` certifies, with confidence
``1 - alpha``, a privacy loss of at least

    ln( lower(k_a, n_a) / upper(k_b, n_b) ),

where ``lower`` and ``upper`` are one-sided Clopper-Pearson bounds at level ``1 - alpha/2`` each
(Bonferroni over the two), because an ``eps``-DP mechanism has ``P_A(E) <= e**eps P_B(E)`` for
every event. The bound is valid only for an event fixed before the ``k`` were counted (the
auditor picks it on separate samples, :mod:`app.audit.events`).

The textbook two-sided 95% interval of 5 successes in 10 trials is (0.187, 0.813):

>>> lo, hi = clopper_pearson_lower(5, 10, 0.975), clopper_pearson_upper(5, 10, 0.975)
>>> round(float(lo), 3), round(float(hi), 3)
(0.187, 0.813)
>>> bool(np.isclose(eps_lower_bound(5, 10, 5, 10, 0.05), np.log(lo / hi)))
True
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.stats import beta

ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]


def clopper_pearson_lower(k: ArrayLike, n: ArrayLike, level: float) -> FloatArray:
    """One-sided lower bound on a binomial proportion: ``P(p >= bound) >= level``.

    ``Beta(level complement; k, n - k + 1)`` quantile, 0 when ``k == 0`` (exact, never the
    normal approximation).
    """
    k_arr, n_arr = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    safe = np.where(k_arr > 0, k_arr, 1.0)
    out = beta.ppf(1.0 - level, safe, n_arr - safe + 1.0)
    return np.asarray(np.where(k_arr > 0, out, 0.0), dtype=np.float64)


def clopper_pearson_upper(k: ArrayLike, n: ArrayLike, level: float) -> FloatArray:
    """One-sided upper bound on a binomial proportion: ``P(p <= bound) >= level``."""
    k_arr, n_arr = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    safe = np.where(k_arr < n_arr, k_arr, n_arr - 1.0)
    out = beta.ppf(level, safe + 1.0, n_arr - safe)
    return np.asarray(np.where(k_arr < n_arr, out, 1.0), dtype=np.float64)


def eps_lower_bound(
    k_a: ArrayLike, n_a: ArrayLike, k_b: ArrayLike, n_b: ArrayLike, alpha: float
) -> FloatArray:
    """``ln(lower_a / upper_b)`` with confidence ``1 - alpha`` (``-inf`` when ``lower_a = 0``).

    Vectorized over any broadcastable shapes of counts.
    """
    level = 1.0 - alpha / 2.0
    lo = clopper_pearson_lower(k_a, n_a, level)
    hi = clopper_pearson_upper(k_b, n_b, level)
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(lo) - np.log(hi), dtype=np.float64)
