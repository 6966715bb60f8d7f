"""OptStream's visual figures: one region's true series against the private releases.

The paper's Figs. 2, 7, 9 and 11 (spec seed-001 §5.4) show streams, not errors: Auvergne-
Rhône-Alpes in January (2016 there; ``rte2013``'s 2013-01 here), ``w = 48``, with

* Fig. 2: Laplace, DFT and OptStream (ES and LS) at eps = 1, 0.1, 0.01;
* Fig. 7: the four component ablations (the paper's eps did not survive; eps = 0.1 here, the
  value of the forecast figures, spec item 21);
* Fig. 9: OptStream_LS on (w, alpha) sums at eps = 1, alpha = 10, 50, 100 (k = 5 at 100);
* Fig. 11: PeGaSus-w against OptStream_LS, the same alphas at eps = 1 (spec item 14).

Fig. 5 (one day's ARMA forecasts) is the left panel of ``fig6_forecast.png``
(:mod:`app.bench.optstream.forecast`). Every mechanism runs with the headline settings of
:mod:`app.bench.optstream.runs` (w-event private: strict periods, the default noise), seed 0; a
panel shows the first ``days`` days so that the half-hourly shape stays visible. ``dpstream
bench optstream --figure visuals --out DIR`` writes ``fig2_streams.png``, ``fig7_streams.png``,
``fig9_streams.png`` and ``fig11_streams.png``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.bench.engine.plots import _pyplot, save
from app.bench.optstream.runs import ABLATIONS, FIG3, W, load_rte, released

__all__ = ["VISUALS", "panels", "write_all"]

REGION = "Auvergne-Rhône-Alpes"
Columns = dict[str, tuple[str, dict[str, Any]]]
VISUALS: dict[str, tuple[str, list[float], Columns]] = {
    "fig2": (
        "eps",
        [1.0, 0.1, 0.01],
        {k: FIG3[k] for k in ("Laplace", "DFT", "OptStream_ES", "OptStream_LS")},
    ),
    "fig7": ("eps", [0.1], ABLATIONS),
    "fig9": ("alpha", [10.0, 50.0, 100.0], {"OptStream_LS": FIG3["OptStream_LS"]}),
    "fig11": ("alpha", [10.0, 50.0, 100.0], {k: FIG3[k] for k in ("PeGaSus", "OptStream_LS")}),
}
"""Figure -> (the rows' axis, its values, the mechanisms drawn)."""


def panels(
    x: np.ndarray, axis: str, values: Sequence[float], columns: Columns, seed: int = 0
) -> dict[float, dict[str, np.ndarray]]:
    """Per row value, ``{"true": x, mechanism: its release}``; ``axis`` ``"eps"`` (counts
    rounded, Delta = 1) or ``"alpha"`` (eps = 1, sums clipped at alpha, k = 5 at 100)."""
    out: dict[float, dict[str, np.ndarray]] = {}
    for v in values:
        eps, alpha = (v, None) if axis == "eps" else (1.0, v)
        row = {"true": x if alpha is not None else np.rint(x)}
        for label, (name, params) in columns.items():
            p = {**params, "k": 5} if "k" in params and alpha == 100.0 else params
            row[label] = released(name, p, x, eps, alpha, seed)
        out[v] = row
    return out


def plot(
    rows: Mapping[float, Mapping[str, np.ndarray]], path: Path, *, axis: str, title: str, days: int
) -> Path:
    """One panel per row value: the true series in black, each release over it."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), 1, figsize=(10, 2.4 * len(rows)), squeeze=False)
    hours = np.arange(days * W) / 2
    for ax, (v, series) in zip(axes[:, 0], rows.items(), strict=True):
        for label, values in series.items():
            style = {"color": "black", "lw": 1.6} if label == "true" else {"lw": 0.8, "alpha": 0.8}
            ax.plot(hours, values[: days * W], label=label, **style)
        ax.set_title(f"{'ε' if axis == 'eps' else 'α'} = {v:g}", fontsize=9)
        ax.set_ylabel("MW")
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("hour of January 2013")
    axes[0, 0].legend(fontsize=7, ncol=len(next(iter(rows.values()))))
    fig.suptitle(title, fontsize=10)
    return save(
        fig,
        path,
        f"{REGION}, rte2013 2013-01, w = {W}, seed 0, headline settings: w-event private "
        "(strict periods, geometric noise, features at w Delta)",
        dpi=80,
    )


def write_all(out: Path, days: int = 7, figures: Sequence[str] = tuple(VISUALS)) -> list[Path]:
    """Draw each of ``figures`` into ``out``; the paths written."""
    regions, x = load_rte("2013-01")
    series = x[:, regions.index(REGION)]
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in figures:
        axis, values, columns = VISUALS[name]
        rows = panels(series, axis, values, columns)
        title = f"OptStream {name.replace('fig', 'Fig. ')}: {REGION}, first {days} days"
        paths.append(plot(rows, out / f"{name}_streams.png", axis=axis, title=title, days=days))
    return paths
