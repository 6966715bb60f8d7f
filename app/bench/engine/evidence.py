"""What the claims read: the means over seeds of every run, by measure, and two facts of the
data (an all-zero release's AMRE, the number of users) that only feed the explanations.

:func:`gather` turns the runs' rows into an :class:`Evidence`; the claim functions
(:mod:`app.bench.report.claims`) read nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.bench.engine.presets import Preset, summarize, sweep_means
from app.bench.engine.runs import Done, Rows

__all__ = ["Evidence", "Means", "RatioMeans", "Runs", "gather", "population", "zero_release_amre"]

Means = dict[tuple[float, int, str], tuple[float, float, int]]
"""``(eps, w, mechanism) -> (mean, sample std, seeds)`` of one sweep."""
Runs = dict[tuple[str, str], Means]
"""``(preset, dataset) -> means`` of every run of one measure."""
RatioMeans = dict[tuple[Any, ...], tuple[float, float, int]]
"""``(o, mechanism) -> (mean, std, seeds)`` of a ratio run (:func:`presets.sweep_means`)."""


@dataclass(frozen=True)
class Evidence:
    """Means over seeds, keyed ``(preset, dataset)``.

    ``amre`` and ``fresh`` (share of published slots) are the central eps and w sweeps,
    ``ratio`` and ``ratio_fresh`` the two-group ratio sweeps, ``mre`` and ``cfpu`` the local
    runs. ``floors`` (AMRE of an all-zero release) and ``populations`` (users) are per dataset.
    """

    amre: Runs = field(default_factory=dict)
    fresh: Runs = field(default_factory=dict)
    ratio: dict[tuple[str, str], RatioMeans] = field(default_factory=dict)
    ratio_fresh: dict[tuple[str, str], RatioMeans] = field(default_factory=dict)
    mre: Runs = field(default_factory=dict)
    cfpu: Runs = field(default_factory=dict)
    floors: dict[str, float] = field(default_factory=dict)
    populations: dict[str, int] = field(default_factory=dict)


def _means(runs: dict[tuple[str, str], Rows], measure: str, keys: tuple[str, ...] = ()) -> Any:
    """Means over seeds of ``measure`` per run, for the runs whose rows carry it: by
    ``(eps, w)`` (:func:`summarize`) or by ``keys`` (:func:`sweep_means`)."""
    out = {}
    for k, rows in runs.items():
        if rows and measure not in rows[0]:
            continue
        out[k] = sweep_means(rows, measure, keys) if keys else summarize(rows, measure)
    return out


def _select(done: Done, kind: str | None = None, ratio: bool = False) -> dict[Any, Rows]:
    """The rows of the runs of ``kind`` (any kind if None) that are (or are not) ratio sweeps."""
    return {
        k: rows
        for k, (p, rows, _) in done.items()
        if (kind is None or p.kind == kind) and (p.sweep == "ratio") == ratio
    }


def gather(
    done: Done,
    floors: dict[str, float] | None = None,
    populations: dict[str, int] | None = None,
) -> Evidence:
    """The means of every run in ``done``, by measure."""
    sweeps = _select(done, "central")
    ratios = _select(done, ratio=True)
    local = _select(done, "local")
    return Evidence(
        amre=_means(sweeps, "amre"),
        fresh=_means(sweeps, "fresh"),
        ratio=_means(ratios, "amre", ("ratio",)),
        ratio_fresh=_means(ratios, "fresh", ("ratio",)),
        mre=_means(local, "mre"),
        cfpu=_means(local, "cfpu"),
        floors=dict(floors or {}),
        populations=dict(populations or {}),
    )


def zero_release_amre(preset: Preset) -> float:
    """AMRE of releasing all-zero histograms on the preset's data (seed 0): the error of a
    mechanism that never publishes."""
    import numpy as np

    from app.bench.engine.datasets import load

    ds = load(preset.dataset, **preset.dataset_options)
    counts = np.stack([np.bincount(row[row >= 0], minlength=ds.d) for row in ds.values])
    return float((counts.astype(np.float64) ** 2).mean())


def population(preset: Preset) -> int:
    """Users in the preset's data (seed 0)."""
    from app.bench.engine.datasets import load

    return int(load(preset.dataset, **preset.dataset_options).values.shape[1])
