"""From per-user values to what a central mechanism sees: per-slot counts per requirement group.

A dataset gives ``values[t, i]``, the cell of user ``i`` at slot ``t`` (negative: no record); a
requirement assignment gives ``user_group[i]`` in ``0..m-1``. A central mechanism's ``step``
takes, per slot, the ``(m, d)`` matrix of users of each group in each cell (spec seed-000
§2.12). :func:`group_counts` builds all of them at once with one ``numpy.bincount`` per block of
slots, never looping over users.

``dpstream replay`` of a local mechanism prints its slots with :func:`local_lines`: next to each
release, the largest spend of any one user in the window of ``w`` slots ending there, and at the
end the largest over every window (:func:`peak_line`). That is the figure ``eps`` bounds; a
slot's rounds together may spend more (``2 eps`` under population division), since they ask
disjoint cohorts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.engine.simulate import LocalRun
from app.dp.budget import PEAK_LABEL, WindowPeak
from app.dp.types import Group

__all__ = ["group_counts", "group_sizes", "local_lines", "peak_line"]

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


def local_lines(
    run: LocalRun,
    groups: Sequence[Group],
    sizes: Sequence[int],
    released: npt.ArrayLike,
    true: npt.ArrayLike,
) -> tuple[list[str], list[WindowPeak]]:
    """One line per slot of a local replay (``run`` kept ``users``), and each group's
    :class:`~app.dp.budget.WindowPeak` over the reports actually sent.

    ``groups`` are the mechanism's requirement groups and ``sizes`` their users, in contiguous
    index blocks (user ``i`` is in the group whose block holds ``i``); ``released`` and
    ``true`` are the per-slot counts. A line ends with ``window max``: per group, the most one
    user spent in the ``w`` slots ending at that slot.

    >>> from app.bench.engine.simulate import run_local
    >>> values = np.zeros((4, 40), dtype=np.int64)
    >>> run = run_local(values, 2, "lpu", {"eps": 1.0, "w": 2, "users": 40},
    ...                 np.random.default_rng(0))
    >>> lines, peaks = local_lines(run, [Group(2, 1.0)], [40], run.histograms() * 40,
    ...                            [[40, 0]] * 4)
    >>> lines[0].split("|")[-1].strip(), peak_line(peaks, ["all"])
    ('window max [1.0000]', 'max per-user spend in any w-window: all 1 of eps 1 (w=2)')
    """
    group_of = np.repeat(np.arange(len(sizes)), np.asarray(sizes, dtype=np.int64))
    peaks = [WindowPeak(g) for g in groups]
    by_slot: dict[int, list[Any]] = {}
    for s in run.sent:
        by_slot.setdefault(s.slot, []).append(s)
    lines = []
    pairs = zip(run.releases, np.asarray(true), np.asarray(released), strict=True)
    for r, c, est in pairs:
        for s in by_slot.get(r.slot, []):
            if s.users is None:
                raise ValueError("the run must keep users (run_local(..., keep='users'))")
            for g, peak in enumerate(peaks):
                mine = s.users[group_of[s.users] == g]
                if mine.size and s.units[g] > 0:
                    peak.record(s.slot, mine.tolist(), int(s.units[g]))
        hist = " ".join(f"{x:9.1f}" for x in est)
        truth = " ".join(f"{int(x):6d}" for x in c)
        window = " ".join(f"{float(p.eps(p.window(r.slot))):.4f}" for p in peaks)
        lines.append(
            f"slot {r.slot:3d} {r.status:9s} released [{hist}] true [{truth}] | "
            f"window max [{window}]"
        )
    return lines, peaks


def peak_line(peaks: Sequence[WindowPeak], names: Sequence[str]) -> str:
    """``max per-user spend in any w-window: NAME X of eps EPS (w=W), ...``: the figure each
    group's ``eps`` bounds, over the whole run."""
    parts = []
    for name, p in zip(names, peaks, strict=True):
        g = p.budget.group
        parts.append(f"{name} {float(p.eps(p.peak)):.4g} of eps {g.eps:g} (w={g.w})")
    return f"{PEAK_LABEL}: {', '.join(parts)}"
