"""Error measures between released histograms ``r`` and true histograms ``c``, shape ``(T, d)``.

* :func:`amre`: the PWSM paper's Eq. 15, ``(1/T) sum_t (1/d) ||r_t - c_t||_2**2``: a per-cell
  mean *squared* error despite its name (spec ``seed-000`` A22). Its figures plot ``ln``.
* :func:`ajsd`: Eq. 16 on normalised histograms, natural log, in ``[0, ln 2]``;
  :func:`ajsd_raw`: the authors' code variant on raw counts (negatives clamped to 0).
* :func:`mae`: mean absolute error per cell.
* :func:`mre`: mean relative error, ``|r - c| / max(c, floor)`` averaged over cells and slots;
  the floor keeps empty cells from dividing by zero (LDP-IDS uses frequencies, see the specs).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Array = npt.ArrayLike


def _pair(r: Array, c: Array) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    ra, ca = np.asarray(r, dtype=np.float64), np.asarray(c, dtype=np.float64)
    if ra.shape != ca.shape or ra.ndim != 2:
        raise ValueError(f"released and true must both be (T, d), got {ra.shape} and {ca.shape}")
    return ra, ca


def amre(r: Array, c: Array) -> float:
    """Eq. 15 of the PWSM paper.

    >>> amre([[1.0, 3.0]], [[0.0, 0.0]])
    5.0
    """
    ra, ca = _pair(r, c)
    return float(((ra - ca) ** 2).mean())


def mae(r: Array, c: Array) -> float:
    """Mean absolute error per cell.

    >>> mae([[1.0, 3.0]], [[0.0, 0.0]])
    2.0
    """
    ra, ca = _pair(r, c)
    return float(np.abs(ra - ca).mean())


def mre(r: Array, c: Array, floor: float = 1.0) -> float:
    """Mean relative error with denominator ``max(c, floor)``.

    >>> mre([[2.0, 0.5]], [[4.0, 0.0]], floor=1.0)
    0.5
    """
    if floor <= 0:
        raise ValueError(f"floor must be > 0, got {floor}")
    ra, ca = _pair(r, c)
    return float((np.abs(ra - ca) / np.maximum(ca, floor)).mean())


def _kl_terms(x: npt.NDArray[np.float64], m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(x / m), 0.0)


def _distribution(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row clamped at 0 and normalised to sum 1 (all-zero rows stay zero)."""
    x = np.clip(x, 0.0, None)
    total = x.sum(axis=1, keepdims=True)
    out: npt.NDArray[np.float64] = np.divide(x, total, out=np.zeros_like(x), where=total > 0)
    return out


def ajsd(r: Array, c: Array) -> float:
    """Eq. 16 on distributions: each slot's histograms clamped at 0 and normalised.

    >>> ajsd([[1.0, 0.0]], [[1.0, 0.0]]), round(ajsd([[1.0, 0.0]], [[0.0, 1.0]]), 6)
    (0.0, 0.693147)
    """
    ra, ca = _pair(r, c)
    p, q = _distribution(ra), _distribution(ca)
    m = (p + q) / 2.0
    return float((_kl_terms(p, m) + _kl_terms(q, m)).sum(axis=1).mean() / 2.0)


def ajsd_raw(r: Array, c: Array) -> float:
    """Eq. 16 literally, on raw counts (negatives clamped to 0), as the authors' code computes it.

    >>> ajsd_raw([[2.0, 0.0]], [[2.0, 0.0]])
    0.0
    """
    ra, ca = _pair(r, c)
    p, q = np.clip(ra, 0.0, None), np.clip(ca, 0.0, None)
    m = (p + q) / 2.0
    return float((_kl_terms(p, m) + _kl_terms(q, m)).sum(axis=1).mean() / 2.0)
