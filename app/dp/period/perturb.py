"""PERTURB: Laplace noise on the sampled slots of a period (OptStream §3.2, Thm 8)."""

from __future__ import annotations

import numpy as np

from app.dp.types import FloatArray, IntArray


def perturb(
    x: FloatArray, samples: IntArray, eps: float, delta: float, rng: np.random.Generator
) -> FloatArray:
    """``x[S] + Lap(k Delta / eps)`` on every cell of the ``(k, d)`` sampled rows.

    Privacy: ``eps``-DP. A w-neighbour moves each sampled slot's histogram by at most ``Delta``
    in L1, so the ``k`` rows move by at most ``k Delta`` (Thm 8; spec §2.13 item 9: the
    argument is sequential composition, ``eps / k`` per sample).

    >>> x = np.array([[1.0], [2.0], [3.0]])
    >>> perturb(x, np.array([0, 2]), 1e9, 1.0, np.random.default_rng(0)).round(6).tolist()
    [[1.0], [3.0]]
    """
    rows = x[samples]
    scale = len(samples) * delta / eps
    return rows + rng.laplace(0.0, scale, rows.shape)
