"""PeGaSus adapted to w-event privacy: perturb, group and smooth at every slot with ``eps/w``
(Chen et al. 2017, as the OptStream paper adapts it in §7; spec §2.11 B3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp.noise import ScalarNoise, add_noise
from app.dp.period.base import PeriodMechanism
from app.dp.types import FloatArray, Group

PERTURB_SHARE = 0.8
"""PeGaSus's split of the per-slot budget: 0.8 to the Perturber, 0.2 to the Grouper."""


class PeGaSus(PeriodMechanism):
    """PeGaSus-w: Perturber, Grouper and median Smoother at every slot, ``eps / w`` each slot.

    Paper
    -----
    Y. Chen, A. Machanavajjhala, M. Hay and G. Miklau, "PeGaSus: Data-Adaptive Differentially
    Private Stream Processing", CCS 2017 (Perturber, Grouper (deviation SVT), median Smoother),
    with budget ``eps / w`` per slot as the OptStream paper adapts it (Fioretto and Van
    Hentenryck, §7); spec ``seed-001-optstream.md`` §2.11 B3.

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    eps' = eps / w            ``period_eps`` (one slot's budget)
    eps_p, eps_g              ``0.8 eps'``, ``0.2 eps'``
    theta                     ``5 delta / eps_g``
    G, closed, theta~         ``group_true``/``group_noisy``, ``closed``, ``threshold``
    ========================  ===========================================================

    Parameters
    ----------
    d, groups, noise, sensitivity, alpha, strict
        As in :class:`~app.dp.period.base.PeriodMechanism` (``strict`` changes nothing here:
        every slot is released at once).

    State
    -----
    t, buffer, ledger
        Slot counter, an empty buffer, the window ledger.
    group_true, group_noisy
        The current group's true and perturbed histograms (at most ``w`` slots).
    closed, threshold
        Whether the last slot closed its group; the current group's noisy threshold.

    Privacy
    -------
    One slot whose histogram moves by ``delta`` in L1 costs ``eps'``: the Perturber adds
    noise of L1 sensitivity ``delta`` at ``eps_p`` (``Lap(delta / eps_p)`` per cell); the
    Grouper is an SVT on the deviation (sensitivity ``2 delta``) with ``Lap(4 delta / eps_g)``
    on the threshold and ``Lap(8 delta / eps_g)`` on each query, ``eps_g``-DP for one slot's
    change (PeGaSus, Thm 4.1); the Smoother is post-processing. With ``geometric`` noise the
    Perturber's noise is discrete Laplace on the integers for counts and on a grid for sums,
    and the Grouper's threshold and deviation are floored onto one grid with discrete Laplace
    noise in its steps (:class:`~app.dp.noise.ScalarNoise`), as listed in
    :mod:`app.dp.period.base`. A w-neighbour changes at most ``w`` slots, so by group privacy every
    window of ``w`` slots costs ``w eps' = eps``. The ledger records ``eps / w`` per slot.

    Deviations
    ----------
    * Histograms: the deviation is summed over the ``d`` categories (still ``2 delta``), so the
      categories share their groups; the median is taken per category.
    * A group is closed after ``w`` slots (a public rule) so the state stays bounded.
    * Releases are truncated at 0 (OptStream paper §6).

    Examples
    --------
    Every slot is released at once with ``eps / w``:

    >>> from app.dp.types import Group
    >>> m = PeGaSus(d=1, groups=[Group(4, 1.0)])
    >>> r = m.step([[10]], np.random.default_rng(0))
    >>> [(x.slot, float(x.spent[0])) for x in r]
    [(1, 0.25)]

    References
    ----------
    Y. Chen et al., CCS 2017. Lyu, Su and Li, PVLDB 10(6), 2017 (SVT).
    """

    name = "pegasus"
    version = 1
    per_slot = True

    def __init__(self, d: int, groups: Sequence[Group], **params: Any) -> None:
        super().__init__(d, groups, **params)

    def describe(self) -> str:
        return (
            f"PeGaSus-w: eps/w={self.period_eps:g} at every slot, 0.8 to the perturbation, "
            "0.2 to the grouping SVT; median smoothing"
        )

    def _reset_extra(self) -> None:
        self.group_true: list[list[float]] = []
        self.group_noisy: list[list[float]] = []
        self.closed = False
        self.threshold = 0.0

    def _state(self) -> dict[str, Any]:
        return {
            **super()._state(),
            "group_true": [list(r) for r in self.group_true],
            "group_noisy": [list(r) for r in self.group_noisy],
            "closed": self.closed,
            "threshold": self.threshold,
        }

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.group_true = [[float(v) for v in r] for r in state["group_true"]]
        self.group_noisy = [[float(v) for v in r] for r in state["group_noisy"]]
        self.closed = bool(state["closed"])
        self.threshold = float(state["threshold"])

    def _release(self, x: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        eps_p, eps_g = PERTURB_SHARE * eps, (1.0 - PERTURB_SHARE) * eps
        delta = self.delta
        row = x[0]
        noisy = add_noise(self.noise, rng, row, eps_p, delta, exact=self.exact)  # Perturber
        svt = ScalarNoise(self.noise, 2.0 * delta)  # the deviation's sensitivity
        if not self.group_true or self.closed or len(self.group_true) >= self.budget_group.w:
            self._new_group(row, noisy, svt.add(rng, 5.0 * delta / eps_g, eps_g, 2))
        else:  # Grouper: does the slot keep the group's deviation under the threshold?
            grown = np.vstack([self.group_true, row])
            dev = float(np.abs(grown - grown.mean(axis=0)).sum())
            if svt.add(rng, dev, eps_g, 4) < self.threshold:
                self.group_true.append([float(v) for v in row])
                self.group_noisy.append([float(v) for v in noisy])
            else:
                self._new_group(row, noisy, self.threshold)
                self.closed = True
        smooth: FloatArray = np.median(np.array(self.group_noisy), axis=0)  # Smoother
        return np.maximum(smooth, 0.0)[None, :]

    def _new_group(self, row: FloatArray, noisy: FloatArray, threshold: float) -> None:
        self.group_true = [[float(v) for v in row]]
        self.group_noisy = [[float(v) for v in noisy]]
        self.closed = False
        self.threshold = threshold
