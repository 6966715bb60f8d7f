"""RescueDP with its dynamic grouping: pages due to sample with small, similar, correlated
predictions share one noisy sum (Wang et al., TDSC 2018; spec ``seed-003`` §A7 variant)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.types import FloatArray, Group, IntArray
from app.dp.wn.base import BoolArray, Spending
from app.dp.wn.rescuedp import RescueDP


def dynamic_groups(
    pred: FloatArray,
    recent: FloatArray,
    candidates: IntArray,
    tau1: float,
    tau2: float,
    tau3: float,
) -> IntArray:
    """Spec A7 steps 2-3: the leader (pivot) page of every page; a page not grouped leads itself.

    ``candidates`` (pages due to sample, with at least ``kappa`` releases and a prediction
    below ``tau1``) are taken in increasing prediction (ties by page). The first left becomes
    a pivot; every later page left joins its group when its prediction is within ``tau3`` of
    the pivot's, the group's predicted sum stays below ``tau1``, and the Pearson correlation
    of its last ``kappa`` releases with the pivot's exceeds ``tau2`` (a flat history has no
    correlation and joins nothing). Everything read is released: post-processing.

    >>> pred = np.array([5.0, 6.0, 40.0, 7.0, 1.0])
    >>> recent = np.array([[4, 5, 6], [5, 6, 7], [39, 40, 41], [8, 7, 6], [0, 1, 2]], float)
    >>> dynamic_groups(pred, recent, np.array([0, 1, 3, 4]), 30.0, 0.5, 25.0).tolist()
    [4, 4, 2, 3, 4]

    Page 4 (prediction 1) pivots and takes pages 0 and 1 (rising like it); page 3 falls, so
    it stays alone; page 2 was no candidate (above ``tau1``).
    """
    leader = np.arange(pred.size)
    if candidates.size < 2:
        return leader
    order = candidates[np.lexsort((candidates, pred[candidates]))]
    hist = recent[order] - recent[order].mean(axis=1, keepdims=True)
    norm = np.sqrt((hist**2).sum(axis=1))
    p = pred[order]
    left = np.ones(order.size, dtype=bool)
    for i in range(order.size):  # one pass per pivot (over pages, never over users)
        if not left[i]:
            continue
        left[i] = False
        rest = np.flatnonzero(left)
        with np.errstate(divide="ignore", invalid="ignore"):
            corr = (hist[rest] @ hist[i]) / (norm[rest] * norm[i])  # NaN: a flat history
        fit = rest[(np.abs(p[rest] - p[i]) < tau3) & (corr > tau2)]
        # in increasing prediction, once the running sum fails every later page fails too
        # (its prediction is no smaller, the sum unchanged): the joiners are a prefix
        under = np.cumsum(np.r_[p[i], p[fit]])[1:] < tau1
        take = fit[: int(under.argmin()) if not under.all() else fit.size]
        leader[order[take]] = order[i]
        left[take] = False
    return leader


class RescueDPGrouped(RescueDP):
    """RescueDP with dynamic grouping: small pages publish one noisy sum per group.

    Paper
    -----
    Q. Wang et al., RescueDP, IEEE TDSC 15(4), 2018 (dynamic grouping), as cited by Liu et al.
    2021 (§5.2) for its baseline; the seeds do not describe the grouping, so this follows the
    reading of ``docs/specs/seed-003-trajectory.md`` §A7 ("optional variant", steps 1-4),
    whose thresholds come from a public re-implementation and are unverified against Wang et
    al. The schedule, budgets and Kalman filter are :class:`~app.dp.wn.rescuedp.RescueDP`'s.

    =====================  =====================================================
    paper / spec A7        here
    =====================  =====================================================
    tau1 (small value)     ``tau1``: a page predicting at or above it publishes alone
    tau2 (correlation)     ``tau2``: Pearson correlation to join a pivot's group
    tau3 (similarity)      ``tau3``: largest prediction gap to the pivot
    kappa (history)        ``kappa``: releases a page needs before it may group
    prediction             mean of the page's last ``kappa`` releases (``recent``)
    group budget           the least budget allotted to a member (``min eps``)
    =====================  =====================================================

    Parameters
    ----------
    d, groups, kp, ki, kd, pid_window, theta, s, p_max, eps_max, process_var, interval_norm,
    noise, sensitivity
        As in RescueDP.
    tau1, tau2, tau3, kappa
        Spec A7's thresholds (30, 0.5, 25, 3), in the counts' units for ``tau1``, ``tau3``.

    State
    -----
    t, last_release, ledger, next_sample, interval, samples, last_sample_t, last_out, errors,
    x_hat, p_var
        As in RescueDP.
    recent
        Per page, its last ``kappa`` releases (oldest first), for the predictions.

    Privacy
    -------
    Neighbours and guarantee as RescueDP's: :data:`~app.dp.wn.base.WN_RELATION` at ``n = 1``,
    w-event ``eps``-DP for every page. At a slot, every sampled page ``m`` is allotted
    ``u_m = min(share eta^m, eps_max)`` (Alg. 4). A group ``g`` spends ``u_g = min_{m in g}
    u_m`` on *each* member (recorded on the ledger before any draw) and releases ``sum_{m in
    g} r^m + Lap(l / u_g)``. A neighbour changes one page ``m`` by at most ``l`` per slot, so
    the sum moves by at most ``l`` and costs page ``m`` at most ``u_g``, which is what its
    ledger records; other groups and single pages do not read ``r^m``. Every page therefore
    spends at most what RescueDP would allot it (``u_g <= u_m <= p_max eta^m``), and its
    window stays strictly below ``eps``. Which pages group depends only on released values
    (post-processing).

    Deviations
    ----------
    * The grouping is spec A7's reading (steps 1-4): candidates are the pages due to sample
      with ``kappa`` releases and a prediction below ``tau1``; greedy pivots in increasing
      prediction. The group's noisy mean is each member's observation for its own Kalman
      filter, with the noise variance divided by the group size squared.
    * A member is charged the group's budget ``u_g``, not its own ``u_m``: the noise is drawn
      at ``u_g``, so the unspent rest stays in the page's window.

    Examples
    --------
    Three small pages rising together and a large one: after ``kappa = 3`` samples the small
    ones share one sum (they spend the same, the least of their allotments), the large one
    publishes alone (``eps = 1000``: the releases follow the counts, so do the predictions):

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = RescueDPGrouped(d=4, groups=[Group(50, 1000.0)], theta=0.0)
    >>> rng = np.random.default_rng(1)
    >>> rel = [m.step([[2 + t, 3 + t, 4 + t, 500]], rng) for t in range(4)]
    >>> m.last_groups.tolist()
    [0, 0, 0, 3]
    >>> len(set(rel[-1].spent_cells[:3].tolist()))
    1

    References
    ----------
    Wang et al., IEEE TDSC 2018; Liu et al., Secur. Commun. Netw. 2021.
    """

    name = "rescuedp_g"
    version = 1

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        tau1: float = 30.0,
        tau2: float = 0.5,
        tau3: float = 25.0,
        kappa: int = 3,
        **params: Any,
    ) -> None:
        self.tau1 = validate.number("tau1", tau1, 0)
        self.tau2 = validate.number("tau2", tau2, -1.0, high=1.0)
        self.tau3 = validate.number("tau3", tau3, 0)
        self.kappa = validate.integer("kappa", kappa, 2)
        super().__init__(d, groups, **params)

    def _reset(self) -> None:
        super()._reset()
        self.recent = np.zeros((self.d, self.kappa))
        self.last_groups: IntArray = np.arange(self.d)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {**super().test_params(), "tau1": 3000.0, "tau3": 2500.0}

    def describe(self) -> str:
        return (
            super().describe() + f"; dynamic grouping: pages predicting < {self.tau1:g} with "
            f"similar (< {self.tau3:g}) and correlated (> {self.tau2:g}) last {self.kappa} "
            "releases publish one sum at their least budget"
        )

    def _perturb(
        self, r: IntArray, sampled: BoolArray, units: IntArray, rng: np.random.Generator
    ) -> tuple[IntArray, FloatArray, FloatArray]:
        idx = np.flatnonzero(sampled)
        pred = self.recent.mean(axis=1)
        ok = (self.samples[idx] >= self.kappa) & (pred[idx] < self.tau1)  # spec A7 step 1
        leader = dynamic_groups(pred, self.recent, idx[ok], self.tau1, self.tau2, self.tau3)
        self.last_groups = leader
        # groups numbered by their leader's page: all singletons keep the page order
        _, label, size = np.unique(leader[idx], return_inverse=True, return_counts=True)
        group_units = np.full(size.size, np.iinfo(np.int64).max)
        np.minimum.at(group_units, label, units[idx])  # the least allotment in the group
        units = units.copy()
        units[idx] = group_units[label]
        self.ledger.ensure(np.zeros(self.d, dtype=np.int64), units)  # Theorem 5 before draws
        eps = self.calibrated(group_units)
        sums = np.bincount(label, weights=r[idx], minlength=size.size)
        noisy = (sums + self.draw(rng, eps)) / size  # spec A7 step 4: the group's mean
        return units, noisy[label], (self.noise_variance(eps) / size**2)[label]

    def _slot(self, t: int, r: IntArray, rng: np.random.Generator) -> Spending:
        spending = super()._slot(t, r, rng)
        idx = np.flatnonzero(spending.fresh)
        self.recent[idx] = np.concatenate([self.recent[idx, 1:], self.last_out[idx, None]], 1)
        return spending

    def _extra_state(self) -> dict[str, Any]:
        return {
            **super()._extra_state(),
            "recent": [[float(x) for x in row] for row in self.recent],
            "last_groups": [int(x) for x in self.last_groups],
        }

    def _extra_load(self, state: dict[str, Any]) -> None:
        super()._extra_load(state)
        self.recent = np.array(state["recent"], dtype=np.float64).reshape(self.d, self.kappa)
        self.last_groups = np.array(state["last_groups"], dtype=np.int64).reshape(self.d)


__all__ = ["RescueDPGrouped", "dynamic_groups"]
