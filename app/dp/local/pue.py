"""PUE: Personalized Utility Enhancement by re-perturbation (PLDP-IDS Alg. 2, Thm V.1, Eq. 8).

Paper: L. Du et al., *PLDP-IDS*, §V.B, Algorithm 2 (lines 1-7), Eq. 8, Thm V.1. Reading aid:
``docs/specs/seed-002-pldp-ids.md`` §2.6, §3.2, A11, A12, A30, A32.

A report of a high-budget group (GRR at ``eps_H``) is re-randomized (RP): kept with probability
``beta = (d p_L - p_L + p_H - 1) / (d p_H - 1)``, else moved to each other value with
``gamma = (p_H - p_L) / (d p_H - 1)`` (Eq. 8). GRR(``eps_H``) followed by RP is *exactly*
GRR(``eps_L``): ``p_H beta + (1 - p_H) gamma = p_L``, so the re-perturbed reports are valid
``eps_L`` reports of the same users and can be pooled with group L's. PUE (Alg. 2) does this for
every pair ``j > i`` of groups sorted by ascending budget, with fresh randomness per pair, so
group ``i`` ends with ``N'_i = sum_{j >= i} N_j`` reports.

Privacy: RP only post-processes reports already sent; it asks nobody and spends nothing
(spec I5). This module therefore never touches a ledger.

Deviations: the paper's calibration (Thm V.1) is implemented, not the authors' channel, which
passes the probability ``1 - gamma`` where a budget belongs (spec A30). Alg. 2 lines 6-7 are
read as ``RP(Y_j; eps_j -> eps_i)`` and ``Ŷ_i ∪ Y'_j`` (A11). Re-perturbation is drawn at
histogram level (a binomial and a multinomial per value), which has the law of per-report RP
(spec §2.6, "Fast simulation"). The pooled groups share users, so their estimates are
correlated; like the paper, the weights ignore this (A32).

Example 3 of the paper with ``eps_3 = 0.5`` (spec A12: the printed 0.6 is a typo; the printed
``beta_{4,3} = 0.65`` is wrong, 0.9204 is right):

>>> [round(x, 4) for x in rp_probabilities(0.5, 0.8, 2)]
[0.8223, 0.1777]
>>> [round(x, 4) for x in rp_probabilities(0.5, 0.6, 2)]
[0.9204, 0.0796]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.local.pfo import grr_pq
from app.dp.types import FloatArray, IntArray


def rp_probabilities(eps_low: float, eps_high: float, d: int) -> tuple[float, float]:
    """``(beta, gamma)`` of RP from ``eps_high`` down to ``eps_low`` (Eq. 8)."""
    if not eps_low <= eps_high:
        raise ParameterError(f"eps_low must be <= eps_high, got {eps_low!r} > {eps_high!r}")
    p_low, _ = grr_pq(eps_low, d)
    p_high, _ = grr_pq(eps_high, d)
    denominator = d * p_high - 1.0
    beta = (d * p_low - p_low + p_high - 1.0) / denominator
    gamma = (p_high - p_low) / denominator
    return beta, gamma


def rp_matrix(eps_low: float, eps_high: float, d: int) -> FloatArray:
    """The ``d x d`` RP channel: ``beta`` on the diagonal, ``gamma`` elsewhere."""
    beta, gamma = rp_probabilities(eps_low, eps_high, d)
    out: FloatArray = np.full((d, d), gamma)
    np.fill_diagonal(out, beta)
    return out


def re_perturb(
    support: npt.ArrayLike, eps_high: float, eps_low: float, rng: np.random.Generator
) -> IntArray:
    """Support counts after RP of every report counted in ``support`` (Alg. 2 l.5)."""
    counts = np.asarray(support, dtype=np.int64)
    d = counts.shape[0]
    beta, _ = rp_probabilities(eps_low, eps_high, d)
    kept = np.asarray(rng.binomial(counts, beta), dtype=np.int64)
    moved = rng.multinomial(counts - kept, np.full(d - 1, 1.0 / (d - 1)))  # (d, d - 1)
    spread = np.zeros((d, d), dtype=np.int64)
    spread[~np.eye(d, dtype=bool)] = moved.ravel()  # row v: to every value but v, in order
    out: IntArray = kept + spread.sum(axis=0)
    return out


def pue(
    eps: list[float], support: npt.ArrayLike, reports: npt.ArrayLike, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """Alg. 2: the enhanced support ``(m, d)`` and report counts ``N'`` of every group.

    ``eps`` must be strictly ascending (the groups of :func:`app.dp.local.pfo.merge`). Group
    ``i`` gets its own reports plus every higher group's reports re-perturbed down to
    ``eps[i]``, each pair with fresh randomness (Alg. 2 l.4-6).
    """
    s = np.asarray(support, dtype=np.int64)
    n = np.asarray(reports, dtype=np.int64).reshape(len(eps))
    if any(b <= a for a, b in zip(eps, eps[1:], strict=False)):
        raise ParameterError(f"eps must be strictly ascending, got {eps!r}")
    out_s = s.copy()
    out_n = n.copy()
    for i in range(len(eps)):  # Alg. 2 l.2
        for j in range(i + 1, len(eps)):  # l.4
            if n[j] > 0:
                out_s[i] += re_perturb(s[j], eps[j], eps[i], rng)  # l.5-6
                out_n[i] += n[j]
    return out_s, out_n
