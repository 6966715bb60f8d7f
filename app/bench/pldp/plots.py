"""Plots of the PLDP-IDS bench in the layout of the paper's Figs. 2-5 (spec seed-002 §6.4).

One PNG per (dataset, sweep), ``pldp-<dataset>-<sweep>.png``: AMSE (log scale, mean over seeds,
band = min..max) against eps (w = 120) or w (eps = 1.5). The left panel holds the methods of
Figs. 2-3 (LPD, LPA with projected releases, PLPD, PLPA, PLPD+, PLPA+), the right one the
ablations of Figs. 4-5 next to PLPD+ / PLPA+. Drawn by :func:`app.bench.engine.plots.plot_sweep`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.bench.engine.plots import plot_sweep

__all__ = ["PANELS", "plot_all"]

PANELS = {
    "main": ("lpd-proj", "lpa-proj", "plpd", "plpa", "plpd+", "plpa+"),
    "ablation": ("plpd+", "plpa+", "plbd-rp", "plba-rp", "plbd-ops", "plba-ops"),
}
"""Panel -> the mechanisms drawn in it."""
FIXED = {"eps": "w = 120", "w": "ε = 1.5"}


def plot_all(rows: Sequence[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Every (dataset, sweep, panel) PNG of ``rows``; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ds, sweep in dict.fromkeys((r["dataset"], r["sweep"]) for r in rows):
        mine = [r for r in rows if (r["dataset"], r["sweep"]) == (ds, sweep)]
        n, t = mine[0]["users"], mine[0]["slots"]
        seeds = sorted({r["seed"] for r in mine})
        for panel, mechs in PANELS.items():
            paths.append(
                plot_sweep(
                    mine,
                    out / f"pldp-{ds}-{sweep}-{panel}.png",
                    x=sweep,
                    measure="amse",
                    title=f"PLDP-IDS {panel} on {ds}: AMSE vs {sweep} ({FIXED[sweep]})",
                    footer=f"dpstream bench pldp; N = {n}, T = {t}, seeds {seeds}",
                    mechanisms=mechs,
                )
            )
    return paths
