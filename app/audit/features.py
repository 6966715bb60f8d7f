"""What the auditor looks at in a run: scalar features and a publish/skip pattern per run.

A *run* is one independent execution of a mechanism over the audited slots, stored as arrays
(:class:`Runs`): the released histograms ``(n, T, d)``, the status of every slot ``(n, T)``,
and, in local mode, the target device's reports. Feature builders turn runs into a matrix
``(n, F)`` (one column per named feature) and one pattern code per run, all with numpy.

Central runs (:func:`central_features`). With ``delta[s]`` the expected difference of the true
histograms of the two inputs at slot ``s`` and ``mid[s]`` their midpoint, each released cell
where the inputs differ becomes ``z = sign(delta) (x - mid) / (|delta| / 2)``: about ``+1`` on
input A and ``-1`` on input B. Features: every such ``z`` (a threshold on one released cell),
per slot the minimum over the differing cells (a rectangle, the sharp event for a replaced
value), and over the fresh releases of the run: the sum of ``z``, the sum of
``clip(z, -1, 1)`` (the privacy-loss statistic of Laplace noise, the Neyman-Pearson optimal test
for a shift), per-cell sums, and the number of fresh releases. The pattern is the sequence of
statuses.

Local runs (:func:`local_features`). The aggregator sees every report, so the sharpest view of
one device is its own reports: per slot and round, ``support[a] - support[b]`` of the target's
report (0 when it did not report), their sum, the number of reports, and the oriented released
frequencies ``x[a] - x[b]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

STATUS_CODES = {"skip": 0, "publish": 1, "nullified": 2}
STATUS_LETTERS = "spn"


@dataclass
class Runs:
    """``n`` runs of ``T`` slots: releases, statuses and (local) the target's reports."""

    hist: FloatArray
    status: IntArray
    reports: FloatArray | None = None
    reported: npt.NDArray[np.bool_] | None = None

    @property
    def fresh(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.status == STATUS_CODES["publish"])


def pattern_codes(status: IntArray, extra: IntArray | None = None) -> IntArray:
    """One integer per run for its status sequence (and an optional small extra per slot)."""
    base = 3 if extra is None else 3 * (int(extra.max(initial=0)) + 1)
    digits = status if extra is None else status + 3 * extra
    weights = base ** np.arange(status.shape[1], dtype=np.int64)
    return np.asarray(digits.astype(np.int64) @ weights, dtype=np.int64)


def pattern_label(code: int, slots: int) -> str:
    """The status letters (s: skip, p: publish, n: nullified) of a status-only pattern code."""
    letters = []
    for _ in range(slots):
        code, digit = divmod(code, 3)
        letters.append(STATUS_LETTERS[digit % 3])
    return "".join(letters)


def central_features(
    runs: Runs, mid: FloatArray, delta: FloatArray
) -> tuple[list[str], FloatArray, IntArray]:
    """Feature names, the ``(n, F)`` matrix and pattern codes of central runs."""
    n, slots, _ = runs.hist.shape
    fresh = runs.fresh
    names: list[str] = []
    cols: list[FloatArray] = []
    cells = np.flatnonzero((delta != 0).any(axis=0))
    scale = np.where(delta != 0, np.abs(delta) / 2.0, 1.0)
    z = np.sign(delta)[None] * (runs.hist - mid[None]) / scale[None]  # (n, T, d)
    active = (delta != 0)[None] & np.ones((n, 1, 1), dtype=bool)
    for s in range(slots):
        live = np.flatnonzero(delta[s] != 0)
        for j in live:
            names.append(f"x[t{s + 1},{j}]")
            cols.append(z[:, s, j])
        if live.shape[0] > 1:
            names.append(f"min_cells[t{s + 1}]")
            cols.append(z[:, s, live].min(axis=1))
    used = active & fresh[:, :, None]
    names += ["window_sum", "loss_stat"]
    cols += [
        np.where(used, z, 0.0).sum(axis=(1, 2)),
        np.where(used, np.clip(z, -1, 1), 0.0).sum(axis=(1, 2)),
    ]
    per_cell = np.where(used, np.clip(z, -1, 1), 0.0).sum(axis=1)  # (n, d)
    for j in cells:
        names.append(f"loss_stat[{j}]")
        cols.append(per_cell[:, j])
    if cells.shape[0] > 1:
        names.append("min_cells(loss_stat)")
        cols.append(per_cell[:, cells].min(axis=1))
    names.append("fresh")
    cols.append(fresh.sum(axis=1).astype(np.float64))
    return names, np.column_stack(cols), pattern_codes(runs.status)


def local_features(runs: Runs, a: int, b: int) -> tuple[list[str], FloatArray, IntArray]:
    """Feature names, matrix and pattern codes of local runs (target holds ``a`` on input A)."""
    assert runs.reports is not None and runs.reported is not None
    n, slots, rounds = runs.reports.shape
    names: list[str] = []
    cols: list[FloatArray] = []
    for s in range(slots):
        for r in range(rounds):
            if runs.reported[:, s, r].any():
                names.append(f"report[t{s + 1},{'dp'[r]}]")
                cols.append(runs.reports[:, s, r])
    oriented = runs.hist[:, :, a] - runs.hist[:, :, b]
    for s in range(slots):
        names.append(f"x[t{s + 1},{a}]-x[t{s + 1},{b}]")
        cols.append(oriented[:, s])
    count = runs.reported.sum(axis=(1, 2)).astype(np.float64)
    total = runs.reports.sum(axis=(1, 2))
    names += ["reports_sum", "reports", "reports_sum-reports", "release_sum"]
    cols += [total, count, total - count, np.where(runs.fresh, oriented, 0.0).sum(axis=1)]
    asked = np.asarray(runs.reported.any(axis=2), dtype=np.int64)
    return names, np.column_stack(cols), pattern_codes(runs.status, asked)
