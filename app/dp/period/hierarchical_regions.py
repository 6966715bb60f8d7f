"""Hierarchical OptStream with one sample set per region: every node of the tree runs SAMPLE,
PERTURB and RECONSTRUCT on its own series, then one joint program (OptStream §5.2, Thm 13;
spec §2.9 l.2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.period.hierarchical import HierOptStream, joint_postprocess
from app.dp.types import FloatArray, Group

REGION_SPLITS = ("sequential", "parallel")
"""How a level's budget reaches its ``d`` leaves: each gets ``eps_level / d`` (sequential
composition, any user) or the whole ``eps_level`` (parallel composition, a user in one leaf)."""


class RegionalHierOptStream(HierOptStream):
    """Hierarchical OptStream, the paper's way: each region (leaf) sampled on its own.

    Paper
    -----
    F. Fioretto and P. Van Hentenryck, OptStream, §5.2 ("for each w-period, the algorithm runs
    the sampling, perturbation, and reconstruction procedure for each level of the aggregation
    tree", Thm 13), on Alg. 2-4; spec ``seed-001-optstream.md`` §2.9 l.1-4.

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    h (levels)                2: the root ``x.sum(axis=1)`` and the ``d`` leaves ``x[:, j]``
    eps / h                   ``period_eps / 2`` per level (l.1)
    node v of the leaf level  region ``j``: its own L1 sample set, perturbation, features
    eps of node v             ``period_eps / (2 d)`` (``sequential``) or ``period_eps / 2``
                              (``parallel``, the paper's Thm 2)
    (other symbols)           as in :class:`~app.dp.period.optstream.OptStream`
    ========================  ===========================================================

    Parameters
    ----------
    d, groups, noise, sensitivity, alpha, strict, k, theta, sampling, features,
    feature_sensitivity, es_split, postprocess
        As in :class:`~app.dp.period.hierarchical.HierOptStream`.
    region_split
        ``"sequential"`` (default): each region runs at ``eps_level / d``; w-event private for
        the library's neighbours, whose per-slot change may fall in any regions. ``"parallel"``
        (the paper): each region at ``eps_level``; private only when every user's data lies in
        one region for the whole window (the paper's households), so
        :meth:`weaker_guarantee` names it.

    State
    -----
    t, buffer, ledger
        As in :class:`~app.dp.period.optstream.OptStream`.

    Privacy
    -------
    Neighbours: the user's contribution to each slot changes by at most ``delta`` in L1 over
    the ``d`` regions (``v_t`` with ``||v_t||_1 <= delta``, in up to ``w`` slots of a period);
    the service doubles ``delta`` for ``neighbours: replace``.

    *Root* (l.2 on the total): ``sum_j v_tj`` moves by at most ``delta`` per slot, so
    OptStream with ``delta`` on the total series is ``eps_level``-DP (Thm 1, features at
    ``w delta`` by default).

    *Leaves*, ``sequential``: region ``j``'s series moves by ``|v_tj| <= ||v_t||_1 <= delta``
    per slot, so its own OptStream run (L1 sampler with ``Delta_L = 2 delta (w - k)``,
    perturbation at ``k delta``, features at ``w delta``) is ``eps_level / d``-DP. A user may
    touch every region in one period (a taxi crossing them, or a change spread over them),
    so the ``d`` runs compose sequentially: ``d * eps_level / d = eps_level``. Parallel
    composition does not apply: the L1 sampler of region ``j`` answers queries whose change
    is bounded by ``max_t |v_tj|``, and those maxima over the regions can sum to ``d delta``.

    *Leaves*, ``parallel`` (Thm 13's proof via Thm 2): if a user's data lie in one region ``j``
    in every slot, neighbours differ in ``x[:, j]`` only, the other regions' runs have the
    same distribution, and the level costs ``eps_level``. Under the library's neighbours this
    is up to ``d`` times too little noise, hence ``weaker_guarantee``.

    Period: root and leaves compose sequentially, ``2 eps_level = period_eps`` (Thm 13 with
    ``h = 2``); the joint NNLS reads only the noisy inputs (post-processing). The ledger and
    strict mode are those of :mod:`app.dp.period.base` and charge ``period_eps`` per period as
    for every OptStream.

    Deviations
    ----------
    * ``sequential`` by default (the paper's parallel composition assumes a user stays in one
      region; spec §2.9 "Privacy"), ``parallel`` kept to reproduce it.
    * Two levels, ``h = 2``; every node weighted ``1 / m_i`` (spec §2.9 resolution), as in
      :class:`~app.dp.period.hierarchical.HierOptStream`, which shares one sample set over
      the regions instead.

    Examples
    --------
    With no noise to speak of the program returns the data, and the released regions add up
    to the released national series:

    >>> from app.dp.types import Group
    >>> m = RegionalHierOptStream(d=2, groups=[Group(3, 1e12)], k=2, strict=False,
    ...                           noise="laplace", sampling="none")
    >>> rng = np.random.default_rng(0)
    >>> out = [r for c in ([4, 1], [6, 2], [8, 3]) for r in m.step([c], rng)]
    >>> np.array([r.histogram for r in out]).round(6).tolist()
    [[4.0, 1.0], [6.0, 2.0], [8.0, 3.0]]
    >>> m.region_eps(m.period_eps / 2) == m.period_eps / 4
    True

    References
    ----------
    McSherry, SIGMOD 2009 (parallel composition). Hay et al., PVLDB 3(1), 2010.
    """

    name = "optstream_hr"
    version = 1

    def __init__(
        self, d: int, groups: Sequence[Group], region_split: str = "sequential", **params: Any
    ) -> None:
        self.region_split = validate.choice("region_split", region_split, REGION_SPLITS)
        super().__init__(d, groups, **params)

    def region_eps(self, level: float) -> float:
        """The budget of one region's run, out of the leaf level's ``level``."""
        return level / self.d if self.region_split == "sequential" else level

    def describe(self) -> str:
        share = "eps_P/(2d)" if self.region_split == "sequential" else "eps_P/2 (parallel)"
        return (
            "Per-region hierarchical "
            + super(HierOptStream, self).describe()
            + f"; root eps_P/2, each of the d={self.d} regions sampled on its own at {share}"
        )

    def weaker_guarantee(self) -> str | None:
        reasons = [super().weaker_guarantee()]
        if self.region_split == "parallel" and self.d > 1:
            reasons.append("region_split=parallel: private only if every user stays in one region")
        return "; ".join(r for r in reasons if r) or None

    def _release(self, x: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        level = eps / 2  # spec §2.9 l.1: eps / h, h = 2
        per_region = self.region_eps(level)
        # l.2 for every leaf: its own SAMPLE / PERTURB / RECONSTRUCT and features
        runs = [self.noisy_inputs(x[:, j : j + 1], per_region, rng) for j in range(self.d)]
        leaves = np.hstack([rec for rec, _ in runs])
        leaf_answers = [
            np.hstack([answers[i] for _, answers in runs]) for i in range(len(self.active_features))
        ]
        # l.2 for the root, at the level's whole budget
        root, root_answers = self.noisy_inputs(x.sum(axis=1, keepdims=True), level, rng)
        # l.3-4: one joint program, national = sum of regions
        return joint_postprocess(leaves, leaf_answers, root, root_answers, self.active_features)


__all__ = ["REGION_SPLITS", "RegionalHierOptStream"]
