"""Stand-ins for finished benchmark runs, so that report tests run no benchmark."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

TINY_OPTIONS = {"N": 300, "T": 300, "users": 3000, "slots": 60}
"""Dataset sizes of :func:`shrink_quick`: a few seconds a run where ``--quick`` takes a minute."""


def skip_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lay out the bench's figures but write each PNG empty (rendering is most of a tiny run's
    time), for tests of where figures go, not of how they look."""
    from app.bench.engine import plots

    def unrendered(fig: Any, path: str | Path, footer: str, dpi: int) -> Path:
        plots._pyplot().close(fig)
        Path(path).write_bytes(b"")
        return Path(path)

    monkeypatch.setattr(plots, "save", unrendered)


def shrink_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``--quick`` presets smaller still (one seed, two sweep points, a few hundred users
    and slots), for tests of what runs and where, not of the numbers."""
    from app.bench.engine import presets, runs

    real = presets.resolve

    def tiny(name: str, dataset: str | None = None, quick: bool = False) -> Any:
        p = real(name, dataset=dataset, quick=quick)
        if not quick:
            return p
        shrink = {k: v for k, v in TINY_OPTIONS.items() if k in p.options.get(p.dataset, {})}
        return replace(
            p,
            seeds=(0,),
            eps_values=p.eps_values[:2],
            w_values=p.w_values[:2],
            ratios=p.ratios[:2],
            options={**p.options, p.dataset: {**p.options.get(p.dataset, {}), **shrink}},
        )

    monkeypatch.setattr(presets, "resolve", tiny)
    monkeypatch.setattr(runs, "resolve", tiny)


def write_cost_slopes(folder: Path, **host: Any) -> Path:
    """Write a finished cost run's ``cost_slopes.csv`` into ``folder``: BD's slope 0.5 (0.6 at
    the top of the range, the claim holding) on each axis d, m and N, with the columns ``host``
    (the run's seed, load and machine facts) on every row; the folder."""
    with (folder / "cost_slopes.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, ["mechanism", "axis", "slope", "slope_top", "holds", *host])
        w.writeheader()
        for axis in ("d", "m", "N"):
            w.writerow(
                {
                    "mechanism": "bd",
                    "axis": axis,
                    "slope": 0.5,
                    "slope_top": 0.6,
                    "holds": True,
                    **host,
                }
            )
    return folder
