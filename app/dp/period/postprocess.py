"""POSTPROCESS: redistribute the noise by a least-squares program over public features
(OptStream Alg. 4, program (O1)-(O3), solved as NNLS; spec §2.8).

A *feature* is a partition of the period's ``w`` slots into consecutive parts, given by its cut
points: ``(14, 24, 36)`` is the paper's F2 (00-07h, 07-12h, 12-18h, 18-24h of a 48-slot day),
``()`` is F3 (the whole period). F1, the singletons, is always present and answered by the
reconstruction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import nnls

from app.dp.errors import ParameterError
from app.dp.noise import NoiseKind, add_noise
from app.dp.types import FloatArray

Feature = tuple[int, ...]

PAPER_CUTS = (14, 24, 36)
"""F2's cut points in a 48-slot day (spec §2.8)."""


def default_features(w: int) -> tuple[Feature, ...]:
    """The paper's F2 and F3 scaled to a period of ``w`` slots: F2's cuts at 14/48, 24/48 and
    36/48 of the period (the paper's exactly for ``w = 48``), F3 the period total.

    >>> default_features(48)
    ((14, 24, 36), ())
    >>> default_features(6)
    ((2, 3, 4), ())
    """
    cuts = sorted({round(w * c / 48) for c in PAPER_CUTS} - {0, w})
    return (tuple(cuts), ()) if cuts else ((),)


def check_features(features: Sequence[Sequence[int]], w: int) -> tuple[Feature, ...]:
    """Validate cut points: strictly increasing integers inside ``(0, w)``."""
    out = []
    for f in features:
        cuts = tuple(int(c) for c in f)
        if any(not 0 < c < w for c in cuts) or list(cuts) != sorted(set(cuts)):
            raise ParameterError(
                f"features must be strictly increasing cut points in (0, {w}), got {list(f)!r}"
            )
        out.append(cuts)
    return tuple(out)


def incidence(w: int, cuts: Feature) -> FloatArray:
    """``A_F``: row ``j`` is the indicator of part ``j`` of the partition.

    >>> x = np.array([10, 15, 20, 23, 41, 72, 55, 50, 88, 72, 40, 18])  # Example 3
    >>> (incidence(12, (4, 9)) @ x).tolist()
    [68.0, 306.0, 130.0]
    """
    edges = (0, *cuts, w)
    a = np.zeros((len(edges) - 1, w))
    for j in range(len(edges) - 1):
        a[j, edges[j] : edges[j + 1]] = 1.0
    return a


def feature_answers(
    x: FloatArray,
    features: Sequence[Feature],
    eps: float,
    sensitivity: float,
    rng: np.random.Generator,
    *,
    noise: NoiseKind,
    exact: bool = False,
) -> list[FloatArray]:
    """Alg. 4 l.2: ``Q_F(x)`` plus noise of L1 sensitivity ``sensitivity`` at ``eps / (p - 1)``
    (``Lap(sensitivity (p - 1) / eps)`` for ``laplace``) for every non-singleton feature.

    ``x`` is ``(w, d)``; each answer is ``(m_F, d)``. Each of the ``p - 1`` features gets
    ``eps / (p - 1)`` (spec §2.13 item 3: ``eps_o``, not ``eps``). ``sensitivity`` is the L1
    sensitivity of one partition query: ``w Delta`` (rigorous) or ``Delta`` (the paper, not
    w-event private). ``geometric`` noise: a partition's sums of counts are integers (``exact``,
    discrete Laplace on the integers); of sums, reals (discrete Laplace on a grid).
    """
    w = x.shape[0]
    out = []
    for cuts in features:
        answer = incidence(w, cuts) @ x
        out.append(add_noise(noise, rng, answer, eps / len(features), sensitivity, exact=exact))
    return out


def stacked_system(w: int, features: Sequence[Feature]) -> tuple[FloatArray, FloatArray]:
    """``(A, sqrt_weights)``: the incidence matrices of F1 (identity) and ``features`` stacked,
    and the square roots of the weights ``lambda_i = 1 / m_i`` of their rows."""
    blocks = [np.eye(w)] + [incidence(w, c) for c in features]
    a = np.vstack(blocks)
    sqrt_weights = np.concatenate([np.full(len(b), np.sqrt(1.0 / len(b))) for b in blocks])
    return a, sqrt_weights


def postprocess(
    reconstructed: FloatArray, answers: Sequence[FloatArray], features: Sequence[Feature]
) -> FloatArray:
    """Solve (O1)-(O3) per column of the ``(w, d)`` reconstruction; return ``(w, d)``, >= 0.

    With F1 the singletons, every constraint (O2) says a feature's part is the sum of its
    slots, so the program is ``min_{z >= 0} sum_i (1/m_i) ||A_i z - c_i||^2``: non-negative
    least squares on the stacked, weighted rows (spec §2.8), solved by
    ``scipy.optimize.nnls``. Post-processing: the inputs are noisy answers only.

    >>> post = postprocess(np.array([[5.0], [-1.0]]), [np.array([[2.0]])], [()])
    >>> post.round(6).tolist()  # the total 2 pulls (5, -1) to (3, 0); z >= 0
    [[3.0], [0.0]]
    """
    w, d = reconstructed.shape
    a, sw = stacked_system(w, features)
    a_weighted = a * sw[:, None]
    out = np.empty((w, d))
    for j in range(d):
        b = np.concatenate([reconstructed[:, j]] + [c[:, j] for c in answers]) * sw
        out[:, j] = nnls(a_weighted, b)[0]
    return out


def feature_norm(values: FloatArray, w: int, features: Sequence[Feature]) -> float:
    """``||v||_{2,lambda}`` of the stacked feature vector ``v`` (F1 first), per Thm 12."""
    _, sw = stacked_system(w, features)
    return float(np.sqrt(((values * (sw[:, None] if values.ndim == 2 else sw)) ** 2).sum()))
