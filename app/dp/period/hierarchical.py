"""Hierarchical OptStream: the total of the ``d`` categories as a root over them, one joint
program, exactly consistent (OptStream §5.2, Thm 13; spec §2.9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.optimize import nnls

from app.dp.errors import ParameterError
from app.dp.period.optstream import OptStream
from app.dp.period.postprocess import Feature, stacked_system
from app.dp.types import FloatArray, Group


def joint_postprocess(
    leaves: FloatArray,
    leaf_answers: Sequence[FloatArray],
    root: FloatArray,
    root_answers: Sequence[FloatArray],
    features: Sequence[Feature],
) -> FloatArray:
    """Spec §2.9 l.3: one NNLS over the ``w * d`` leaf slots; the root is their sum.

    Rows: every leaf's stacked features (F1 = its reconstruction) and the root's stacked
    features applied to the sum of the leaves, every node with the weights ``1 / m_i``
    (spec §2.9 resolution). Returns the ``(w, d)`` leaves, ``>= 0``; the root released with
    them is their sum, so national = sum of regions holds exactly.

    >>> out = joint_postprocess(np.array([[4.0, 4.0]]), [np.array([[4.0, 4.0]])],
    ...                         np.array([[2.0]]), [np.array([[2.0]])], [()])
    >>> out.round(6).tolist()  # leaves say 4 + 4, the root says 2: they meet at 2 + 2
    [[2.0, 2.0]]
    """
    w, d = leaves.shape
    a, sw = stacked_system(w, features)
    aw = a * sw[:, None]
    rows = aw.shape[0]
    matrix = np.zeros(((d + 1) * rows, d * w))
    target = np.zeros((d + 1) * rows)
    for j in range(d):
        matrix[j * rows : (j + 1) * rows, j * w : (j + 1) * w] = aw
        target[j * rows : (j + 1) * rows] = np.concatenate(
            [leaves[:, j]] + [c[:, j] for c in leaf_answers]
        )
        matrix[d * rows :, j * w : (j + 1) * w] = aw
    target[d * rows :] = np.concatenate([root[:, 0]] + [c[:, 0] for c in root_answers])
    target[: d * rows] *= np.tile(sw, d)
    target[d * rows :] *= sw
    z: FloatArray = nnls(matrix, target, maxiter=50 * d * w)[0]
    return z.reshape(d, w).T


class HierOptStream(OptStream):
    """Hierarchical OptStream: root (the total over categories) and ``d`` leaves, consistent.

    Paper
    -----
    F. Fioretto and P. Van Hentenryck, OptStream, §5.2 (hierarchical streams, Thm 13), on
    Alg. 2-4; spec ``seed-001-optstream.md`` §2.9. The paper's national series and its 12
    regions are the root and ``d = 12`` leaves.

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    h (levels)                2: the root ``x.sum(axis=1)`` and the leaves ``x``
    eps / h                   ``period_eps / 2`` per level
    (other symbols)           as in :class:`~app.dp.period.optstream.OptStream`
    ========================  ===========================================================

    Parameters
    ----------
    d, groups, noise, sensitivity, alpha, strict, k, theta, sampling, features,
    feature_sensitivity, es_split
        As in :class:`~app.dp.period.optstream.OptStream`.
    postprocess
        Must be True: the joint program is what makes the levels consistent.

    State
    -----
    t, buffer, ledger
        As in :class:`~app.dp.period.optstream.OptStream`.

    Privacy
    -------
    Neighbours: the user's contribution to each slot changes by at most ``delta`` in L1 (add-
    remove of one count, or of one clipped amount ``alpha``); the service doubles it for
    ``neighbours: replace``.
    Each level runs SAMPLE, PERTURB and the feature queries with ``period_eps / 2`` (its own
    sample set); by sequential composition over the two levels a period costs
    ``period_eps`` (Thm 13), and the joint program is post-processing. The root series moves
    by at most ``delta`` per slot, like the leaves together, so both levels use ``delta``.
    The ledger and strict mode are those of :mod:`app.dp.period.base`.

    Deviations
    ----------
    * Two levels, ``h = 2`` (spec §1.4 resolution, item 12); every node weighted ``1 / m_i``
      (spec §2.9 resolution).
    * The leaves are one joint release (one sample set, shared scales), not parallel
      composition over regions: a user may move between categories from slot to slot. The
      paper samples each region on its own:
      :class:`~app.dp.period.hierarchical_regions.RegionalHierOptStream` (``optstream_hr``).

    Examples
    --------
    The released leaves always add up to the released root (spec §3 item 9):

    >>> from app.dp.types import Group
    >>> m = HierOptStream(d=3, groups=[Group(6, 1.0)], k=3, theta=50.0)
    >>> rng = np.random.default_rng(2)
    >>> out = [r for c in range(6) for r in m.step([[100 + c, 50, 20 * c]], rng)]
    >>> len(out), bool((np.array([r.histogram for r in out]) >= 0).all())
    (6, True)

    References
    ----------
    Hay et al., PVLDB 3(1), 2010 (consistent hierarchical releases by least squares).
    """

    name = "optstream_h"
    version = 1

    def __init__(self, d: int, groups: Sequence[Group], **params: Any) -> None:
        super().__init__(d, groups, **params)
        if not self.postprocess:
            raise ParameterError("postprocess must be True for the hierarchical variant")

    def describe(self) -> str:
        return "Hierarchical " + super().describe() + "; eps_P/2 per level (root, leaves)"

    def _release(self, x: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        level = eps / 2  # Thm 13: eps / h per level
        leaves, leaf_answers = self.noisy_inputs(x, level, rng)
        root, root_answers = self.noisy_inputs(x.sum(axis=1, keepdims=True), level, rng)
        return joint_postprocess(leaves, leaf_answers, root, root_answers, self.active_features)
