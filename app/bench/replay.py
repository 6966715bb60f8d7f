"""From per-user values to what a central mechanism sees: per-slot counts per requirement group.

A dataset gives ``values[t, i]``, the cell of user ``i`` at slot ``t`` (negative: no record); a
requirement assignment gives ``user_group[i]`` in ``0..m-1``. A central mechanism's ``step``
takes, per slot, the ``(m, d)`` matrix of users of each group in each cell (spec seed-000
§2.12). :func:`group_counts` builds all of them at once with one ``numpy.bincount`` per block of
slots, never looping over users.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["group_counts", "group_sizes"]

_BLOCK_CELLS = 1 << 22  # about 4M (slot, user) pairs per bincount: bounds temporary memory


def group_counts(
    values: npt.ArrayLike, user_group: npt.ArrayLike, m: int, d: int
) -> npt.NDArray[np.int64]:
    """Per-slot counts ``(T, m, d)``: users of group ``g`` holding value ``j`` at slot ``t``.

    Parameters
    ----------
    values
        ``(T, N)`` integers in ``0..d-1``; negative entries (no record) are not counted.
    user_group
        ``(N,)`` group index of each user, in ``0..m-1``.
    m, d
        Number of groups and of cells.

    Examples
    --------
    >>> v = np.array([[0, 1, 1], [2, -1, 0]])
    >>> group_counts(v, [0, 1, 1], m=2, d=3).tolist()
    [[[1, 0, 0], [0, 2, 0]], [[0, 0, 1], [1, 0, 0]]]
    """
    v = np.asarray(values)
    g = np.asarray(user_group, dtype=np.int64)
    if v.ndim != 2 or not np.issubdtype(v.dtype, np.integer):
        raise ValueError(f"values must be a (T, N) integer array, got {v.dtype} {v.shape}")
    T, N = v.shape
    if g.shape != (N,):
        raise ValueError(f"user_group must have shape ({N},), got {g.shape}")
    if m < 1 or d < 1:
        raise ValueError(f"m and d must be >= 1, got m={m}, d={d}")
    if N and (g.min() < 0 or g.max() >= m):
        raise ValueError(f"user_group must lie in [0, {m - 1}]")
    if v.size and v.max() >= d:
        raise ValueError(f"values must be < d={d}, got {int(v.max())}")
    out = np.zeros((T, m, d), dtype=np.int64)
    base = g * d  # column offset of each user's group
    step = max(1, _BLOCK_CELLS // max(N, 1))
    for lo in range(0, T, step):  # blocks of slots, not users
        block: npt.NDArray[Any] = v[lo : lo + step]
        rows = block.shape[0]
        key = (np.arange(rows, dtype=np.int64)[:, None] * (m * d) + base[None, :]) + block
        key = key[block >= 0]
        out[lo : lo + rows] = np.bincount(key, minlength=rows * m * d).reshape(rows, m, d)
    return out


def group_sizes(user_group: npt.ArrayLike, m: int) -> npt.NDArray[np.int64]:
    """Users per requirement group: the public ``n_g`` that OBS takes (spec seed-000 §1.2).

    It counts every user of the group, whether or not the user has a record at a given slot,
    so it never depends on the data; pass it as ``population`` to a central ``step``.

    >>> group_sizes([0, 1, 1, 2], m=4).tolist()
    [1, 2, 1, 0]
    """
    return np.bincount(np.asarray(user_group, dtype=np.int64), minlength=m).astype(np.int64)
