"""RECONSTRUCT: linear interpolation between the noisy samples (OptStream §3.3)."""

from __future__ import annotations

import numpy as np

from app.dp.types import FloatArray, IntArray


def reconstruct(noisy: FloatArray, samples: IntArray, w: int) -> FloatArray:
    """``xi^S(i)`` for ``i = 0..w-1``, per column: the piecewise-linear function through the
    noisy samples, held constant outside them (``numpy.interp``).

    Post-processing: it reads only the noisy samples and public indexes, never raw data.

    >>> reconstruct(np.array([[0.0, 10.0], [4.0, 2.0]]), np.array([0, 4]), 5).tolist()
    [[0.0, 10.0], [1.0, 8.0], [2.0, 6.0], [3.0, 4.0], [4.0, 2.0]]
    """
    grid = np.arange(w)
    out = np.empty((w, noisy.shape[1]))
    for j in range(noisy.shape[1]):
        out[:, j] = np.interp(grid, samples, noisy[:, j])
    return out
