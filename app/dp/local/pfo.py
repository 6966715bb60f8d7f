"""PFO (GPRR): the personalized frequency oracle of PLDP-IDS, and its error formulas.

Paper: L. Du, Y. Hu, X. Zhou, Y. Cao, P. Cheng, W. Ni, K. Li, *PLDP-IDS: Personalized Local
Differential Privacy for Infinite Data Stream*, 2025 preprint, §IV.A (PFO.P, PFO.A,
PFO.E, Eq. 1), Thm IX.2 (Eq. 2 / Eq. 11), §V.A (Eqs. 4-7). Reading aid:
``docs/specs/seed-002-pldp-ids.md`` §2.1-§2.4, §2.7.

Users are grouped by the budget they reported with. Group ``k`` holds ``N_k`` GRR reports at
budget ``eps_k`` (PFO.P is plain :class:`~app.dp.oracles.GRR` at the user's own budget); its
support counts are ``C_k`` (how many reports equal each value). Then

* PFO.A: ``h_k = C_k / N_k`` (spec A3: the paper's ``n q_k`` is a typo);
* PFO.E (Eq. 1): ``f = sum_k alpha_k (h_k - q_k) / (p_k - q_k)``, with the *average-variance*
  weights ``alpha_k ∝ 1 / Var̄_k``; ``Var̄_k = c_k / (d N_k)`` where
  ``c_k = (d - 1)(2 e^eps_k + d - 2) / (e^eps_k - 1)**2`` (spec §2.3, closed form), so
  ``alpha_k ∝ N_k / c_k``;
* Eq. 2: the summed variance of that estimate is ``V_PLDP = 1 / sum_k N_k / c_k`` *exactly*,
  for every true ``f`` (spec §2.3, "Exactness"; A16);
* Eq. 5: sampling ``z`` of ``n`` users adds ``V_smpl = (n - z) / (z (n - 1))``;
* Eq. 7: the reporting error of a sample is ``err = (V_smpl + V_PLDP) / d``.

Groups with no reports are dropped everywhere (spec §8). Budgets are merged into groups by
their value rounded to 12 decimals (spec §3.1, "Budget values as keys").

Example 1 of the paper (spec §5): 100 users, ``d = 5``, ``eps = 1``; 98 users have ``w = 4``
and 2 users ``w = 8``. Uniform ``w = 8`` against two groups:

>>> round(count_error([1 / 8], [100], 5), 3), round(count_error([1 / 4, 1 / 8], [98, 2], 5), 3)
(152.688, 75.303)
>>> f = estimate([1.0, 2.0], [[60, 40], [80, 20]], [100, 100], d=2)
>>> f.round(4).tolist()
[0.8647, 0.1353]
>>> project_simplex([0.301, 0.194, -0.047, 0.336, 0.215]).round(3).tolist()
[0.29, 0.182, 0.0, 0.324, 0.204]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.types import FloatArray, IntArray

KEY_DECIMALS = 12
"""Budgets equal after rounding to this many decimals form one PFO group (spec §3.1)."""


def budget_key(eps: float) -> float:
    """The canonical value under which a budget is grouped."""
    return round(float(eps), KEY_DECIMALS)


def grr_pq(eps: float, d: int) -> tuple[float, float]:
    """``(p, q)`` of GRR at budget ``eps`` over ``d`` values (spec §1.1)."""
    e = math.exp(eps)
    return e / (e + d - 1), 1.0 / (e + d - 1)


def unit_variance(eps: float, d: int) -> float:
    """``c = d lambda + mu`` for one report: the summed variance of one GRR report's estimate.

    ``(d - 1)(2 e^eps + d - 2) / (e^eps - 1)**2`` (spec §2.3, closed form of Eq. 2).
    """
    em1 = math.expm1(eps)
    return (d - 1) * (2.0 * math.exp(eps) + d - 2) / (em1 * em1)


def pldp_variance(eps: Sequence[float], counts: Sequence[float], d: int) -> float:
    """``V_PLDP`` (Eq. 2): the summed variance of the PFO estimate from ``counts[k]`` reports
    at ``eps[k]`` (``inf`` when nobody reports)."""
    precision = sum(
        float(n) / unit_variance(float(e), d) for e, n in zip(eps, counts, strict=True) if n > 0
    )
    return math.inf if precision <= 0 else 1.0 / precision


def sampling_variance(n: int, z: float) -> float:
    """``V_smpl(n, z) = (n - z) / (z (n - 1))`` (Eq. 5): sampling ``z`` of ``n`` users."""
    if z <= 0:
        return math.inf
    if n <= 1:
        return 0.0
    return (n - z) / (z * (n - 1))


def report_error(eps: Sequence[float], counts: Sequence[float], n: int, d: int) -> float:
    """``err`` (Eq. 7): ``(V_smpl(n, z) + V_PLDP) / d`` for a sample of ``z = sum(counts)``
    users of ``n``, ``counts[k]`` of them reporting at ``eps[k]``."""
    z = float(sum(counts))
    return (sampling_variance(n, z) + pldp_variance(eps, counts, d)) / d


def weights(eps: Sequence[float], counts: Sequence[float], d: int) -> FloatArray:
    """The average-variance weights ``alpha_k`` (PFO.E); 0 for empty groups."""
    raw = np.array(
        [
            float(n) / unit_variance(float(e), d) if n > 0 else 0.0
            for e, n in zip(eps, counts, strict=True)
        ],
        dtype=np.float64,
    )
    total = raw.sum()
    return raw / total if total > 0 else raw


def estimate(
    eps: Sequence[float], support: npt.ArrayLike, reports: Sequence[int] | IntArray, d: int
) -> FloatArray:
    """PFO.A + PFO.E (Eq. 1): frequencies from per-group support counts ``(m, d)``.

    ``reports[k]`` GRR reports at budget ``eps[k]`` produced ``support[k]``; the group estimates
    are combined with :func:`weights`. All zeros when nobody reported.
    """
    s = np.asarray(support, dtype=np.float64).reshape(len(eps), d)
    n = np.asarray(reports, dtype=np.float64).reshape(len(eps))
    if (n < 0).any() or (s < 0).any():
        raise ParameterError("support and reports must be non-negative")
    alpha = weights(list(eps), n.tolist(), d)
    out = np.zeros(d)
    for k, e in enumerate(eps):  # a loop over budget groups, not users
        if n[k] > 0:
            p, q = grr_pq(float(e), d)
            out += alpha[k] * (s[k] / n[k] - q) / (p - q)  # PFO.A, then Eq. 1
    return out


def merge(
    eps: Sequence[float], support: npt.ArrayLike, reports: Sequence[int] | IntArray, d: int
) -> tuple[list[float], IntArray, IntArray]:
    """Pool groups with equal budgets (:func:`budget_key`); return them by ascending budget."""
    s = np.asarray(support, dtype=np.int64).reshape(len(eps), d)
    n = np.asarray(reports, dtype=np.int64).reshape(len(eps))
    keys = sorted({budget_key(e) for e in eps})
    index = {k: i for i, k in enumerate(keys)}
    out_s = np.zeros((len(keys), d), dtype=np.int64)
    out_n = np.zeros(len(keys), dtype=np.int64)
    for k, e in enumerate(eps):
        out_s[index[budget_key(e)]] += s[k]
        out_n[index[budget_key(e)]] += n[k]
    return keys, out_s, out_n


def count_error(eps: Sequence[float], users: Sequence[int], d: int) -> float:
    """The absolute count error ``sqrt(sum_k N_k (d - 2 + e^eps_k) / (e^eps_k - 1)**2)`` of
    Example 1 (spec §2.3, "count-scale form": GRR count variance without the ``f`` term)."""
    return math.sqrt(
        sum(n * (d - 2 + math.exp(e)) / math.expm1(e) ** 2 for e, n in zip(eps, users, strict=True))
    )


def project_simplex(v: npt.ArrayLike) -> FloatArray:
    """The Euclidean projection onto the probability simplex (spec §2.7, A24)."""
    x = np.asarray(v, dtype=np.float64)
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1.0
    j = np.arange(1, x.size + 1)
    rho = int(np.flatnonzero(u - css / j > 0)[-1]) + 1
    theta = css[rho - 1] / rho
    out: FloatArray = np.maximum(x - theta, 0.0)
    return out
