"""PERTURB: noise on the sampled slots of a period (OptStream §3.2, Thm 8)."""

from __future__ import annotations

import numpy as np

from app.dp.noise import NoiseKind, add_noise
from app.dp.types import FloatArray, IntArray


def perturb(
    x: FloatArray,
    samples: IntArray,
    eps: float,
    delta: float,
    rng: np.random.Generator,
    *,
    noise: NoiseKind,
    exact: bool = False,
) -> FloatArray:
    """``x[S]`` plus noise of L1 sensitivity ``k Delta`` on every cell of the ``(k, d)`` rows:
    ``Lap(k Delta / eps)`` for ``laplace``; for ``geometric``, discrete Laplace on the integers
    when ``exact`` (counts: integer rows, integer ``k Delta``), on a grid otherwise (sums).

    Privacy: ``eps``-DP. A w-neighbour moves each sampled slot's histogram by at most ``Delta``
    in L1, so the ``k`` rows move by at most ``k Delta`` (Thm 8; spec §2.13 item 9: the
    argument is sequential composition, ``eps / k`` per sample).

    >>> x = np.array([[1.0], [2.0], [3.0]])
    >>> perturb(x, np.array([0, 2]), 1e9, 1.0, np.random.default_rng(0), noise="laplace"
    ...         ).round(6).tolist()
    [[1.0], [3.0]]
    """
    rows = x[samples]
    return add_noise(noise, rng, rows, eps, len(samples) * delta, exact=exact)
