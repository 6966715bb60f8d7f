"""The distinguishing-event search: pick an event on one half of the runs, count it on the other.

Each run of a mechanism is summarized by a row of scalar *features* (released cells, window
sums, a clipped privacy-loss statistic, the number of fresh releases, ...; see
:mod:`app.audit.features`) and one categorical *pattern* code (the publish/skip/nullified
sequence). Candidate events are

* ``feature >= c`` and ``feature <= c`` for every feature and every distinct value ``c`` of the
  pooled search samples (thinned to at most :data:`MAX_THRESHOLDS` quantiles), and
* ``pattern == p`` for every pattern seen,

each in both directions (likelier on ``A`` or on ``B``). On the *search* half every candidate is
scored by the very lower bound it would certify (:func:`app.audit.bounds.eps_lower_bound`), so
rare events pay for their uncertainty; the best one is then counted once on the *holdout* half,
which makes its bound valid (one pre-registered event, no selection on the data it is measured
on). Everything is vectorized: thresholds by ``searchsorted`` on sorted columns.

>>> rng = np.random.default_rng(1)
>>> a = rng.laplace(1.0, 1.0, (4000, 1)); b = rng.laplace(0.0, 1.0, (4000, 1))
>>> pa = np.zeros(4000, dtype=np.int64); pb = pa.copy()
>>> event = search(["x"], a[:2000], b[:2000], pa[:2000], pb[:2000], alpha=0.05)
>>> event.feature  # a threshold on x (>= c likelier on A, or <= c likelier on B)
'x'
>>> result = evaluate(event, ["x"], a[2000:], b[2000:], pa[2000:], pb[2000:], alpha=0.05)
>>> 0.5 < result.lower_bound <= 1.0  # Laplace shift 1 at scale 1 is exactly 1-DP
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from app.audit.bounds import eps_lower_bound

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Op = Literal[">=", "<=", "=="]
Side = Literal["A", "B"]

MAX_THRESHOLDS = 256
"""Candidate thresholds per feature and direction (quantiles of the pooled search values)."""


@dataclass(frozen=True)
class Event:
    """``feature op threshold`` (``pattern == code`` for patterns), likelier on ``favours``."""

    feature: str
    op: Op
    threshold: float
    favours: Side
    search_bound: float

    def occurs(self, values: FloatArray) -> npt.NDArray[np.bool_]:
        """Whether the event happened in each run, given that run's value of the feature."""
        if self.op == ">=":
            return np.asarray(values >= self.threshold)
        if self.op == "<=":
            return np.asarray(values <= self.threshold)
        return np.asarray(values == self.threshold)

    def describe(self, pattern_label: str | None = None) -> str:
        if self.feature == "pattern":
            return f"pattern == {pattern_label or int(self.threshold)} (likelier on {self.favours})"
        return f"{self.feature} {self.op} {self.threshold:.4g} (likelier on {self.favours})"


@dataclass(frozen=True)
class Result:
    """The event's counts on the holdout half and the lower bound they certify."""

    event: Event
    k_a: int
    n_a: int
    k_b: int
    n_b: int
    lower_bound: float


def _threshold_counts(
    col_a: FloatArray, col_b: FloatArray
) -> tuple[FloatArray, IntArray, IntArray, IntArray, IntArray]:
    """Candidate thresholds and, for each, how many runs of A and B are >= and <= it."""
    pooled = np.unique(np.concatenate([col_a, col_b]))
    if pooled.shape[0] > MAX_THRESHOLDS:
        pooled = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, MAX_THRESHOLDS)))
    sa, sb = np.sort(col_a), np.sort(col_b)
    ge_a = sa.shape[0] - np.searchsorted(sa, pooled, side="left")
    ge_b = sb.shape[0] - np.searchsorted(sb, pooled, side="left")
    le_a = np.searchsorted(sa, pooled, side="right")
    le_b = np.searchsorted(sb, pooled, side="right")
    as_int = (np.asarray(x, dtype=np.int64) for x in (ge_a, ge_b, le_a, le_b))
    return (pooled, *as_int)  # type: ignore[return-value]


def search(
    names: Sequence[str],
    a: FloatArray,
    b: FloatArray,
    pattern_a: IntArray,
    pattern_b: IntArray,
    alpha: float,
) -> Event:
    """The candidate event with the largest lower bound on these (search) samples."""
    na, nb = a.shape[0], b.shape[0]
    best = Event("pattern", "==", float(pattern_a[0]) if na else 0.0, "A", -np.inf)

    def consider(feature: str, op: Op, thresholds: FloatArray, ka: IntArray, kb: IntArray) -> None:
        nonlocal best
        for favours, bounds in (
            ("A", eps_lower_bound(ka, na, kb, nb, alpha)),
            ("B", eps_lower_bound(kb, nb, ka, na, alpha)),
        ):
            i = int(np.argmax(bounds))
            if bounds[i] > best.search_bound:
                best = Event(feature, op, float(thresholds[i]), favours, float(bounds[i]))  # type: ignore[arg-type]

    for j, name in enumerate(names):
        thresholds, ge_a, ge_b, le_a, le_b = _threshold_counts(a[:, j], b[:, j])
        consider(name, ">=", thresholds, ge_a, ge_b)
        consider(name, "<=", thresholds, le_a, le_b)
    codes, inverse = np.unique(np.concatenate([pattern_a, pattern_b]), return_inverse=True)
    ka = np.bincount(inverse[:na], minlength=codes.shape[0])
    kb = np.bincount(inverse[na:], minlength=codes.shape[0])
    consider("pattern", "==", codes.astype(np.float64), ka, kb)
    return best


def evaluate(
    event: Event,
    names: Sequence[str],
    a: FloatArray,
    b: FloatArray,
    pattern_a: IntArray,
    pattern_b: IntArray,
    alpha: float,
) -> Result:
    """Count ``event`` on holdout samples and certify its lower bound."""
    if event.feature == "pattern":
        va, vb = pattern_a.astype(np.float64), pattern_b.astype(np.float64)
    else:
        j = list(names).index(event.feature)
        va, vb = a[:, j], b[:, j]
    ka, kb = int(event.occurs(va).sum()), int(event.occurs(vb).sum())
    na, nb = va.shape[0], vb.shape[0]
    if event.favours == "A":
        bound = float(eps_lower_bound(ka, na, kb, nb, alpha))
    else:
        bound = float(eps_lower_bound(kb, nb, ka, na, alpha))
    return Result(event, ka, na, kb, nb, bound)
