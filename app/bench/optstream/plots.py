"""Plots of the OptStream bench in the style of the paper's figures (Fioretto & Van Hentenryck).

Figs. 3 and 8 plot log10 mean L1 error against eps, Figs. 4 and 10 against alpha, one line per
mechanism, one panel per month (and level, Fig. 4). Here one panel per (dataset, month) series
of :mod:`app.bench.optstream.runs`, the y axis the log10 of the mean over regions and trials (the
numbers of its Markdown tables), the x axis log-scaled for eps. Fig. 6 (the day-ahead forecast,
:mod:`app.bench.optstream.forecast`) shows one day's forecasts next to the error of every day.
matplotlib on the Agg backend, as :mod:`app.bench.engine.plots`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from app.bench.engine.plots import MARKERS, _pyplot, save

__all__ = ["plot_forecast", "plot_optstream"]

Results = dict[tuple[str, str, str, float, float | None], float]
"""``(dataset, month, mechanism, eps, alpha) -> mean L1`` as
:func:`app.bench.optstream.runs.run`."""


def plot_optstream(
    results: Results,
    path: str | Path,
    *,
    x: str,
    mechanisms: Sequence[str],
    title: str,
    footer: str,
    dashed: Sequence[str] = (),
) -> Path:
    """log10 mean L1 against ``x`` (``"eps"`` or ``"alpha"``), one panel per (dataset, month),
    one line per mechanism (dashed and faded when in ``dashed``: the columns that are not
    private); write a PNG."""
    plt = _pyplot()
    series = sorted({(d, m) for d, m, *_ in results})
    fig, axes = plt.subplots(
        1, len(series), figsize=(max(3.4 * len(series), 7.0), 3.8), sharey=True, squeeze=False
    )
    for ax, (ds, month) in zip(axes[0], series, strict=True):
        for k, name in enumerate(mechanisms):
            points = sorted(
                (e if x == "eps" else float(a or 1), v)
                for (d, m, lab, e, a), v in results.items()
                if (d, m, lab) == (ds, month, name)
            )
            ax.plot(
                [p for p, _ in points],
                [math.log10(v) for _, v in points],
                marker=MARKERS[k % len(MARKERS)],
                label=name,
                linestyle="--" if name in dashed else "-",
                alpha=0.6 if name in dashed else 1.0,
            )
        if x == "eps":
            ax.set_xscale("log")
        ax.set_xlabel("ε" if x == "eps" else "α")
        ax.set_title(f"{ds} {month}", fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
    axes[0][0].set_ylabel("log10 mean L1 error")
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title, fontsize=10)
    return save(fig, path, footer, dpi=80)


def plot_forecast(
    truth: np.ndarray,
    forecasts: Mapping[str, np.ndarray],
    day_errors: Mapping[str, np.ndarray],
    days: Sequence[str],
    path: str | Path,
    *,
    title: str,
    footer: str,
) -> Path:
    """Fig. 6: left, one day's true series and the day-ahead forecast fitted on each series
    (``forecasts``: label -> its ``W`` values); right, the mean L1 forecast error of every
    target day (``day_errors``: label -> one value per day of ``days``), log10; write a PNG."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    left.plot([h / 2 for h in range(len(truth))], truth, color="black", lw=2, label="true")
    for k, (name, values) in enumerate(forecasts.items()):
        left.plot(
            [h / 2 for h in range(len(values))],
            values,
            lw=1,
            label=name,
            marker=MARKERS[k % len(MARKERS)],
            markevery=6,
            markersize=4,
        )
    left.set_xlabel(f"hour of {days[0]}")
    left.set_ylabel("MW")
    left.set_title("day-ahead forecasts of the first target day", fontsize=9)
    left.legend(fontsize=7)
    for k, (name, errs) in enumerate(day_errors.items()):
        right.plot(
            range(len(errs)),
            np.log10(errs),
            lw=1,
            label=name,
            marker=MARKERS[k % len(MARKERS)],
            markersize=4,
        )
    right.set_xticks(range(0, len(days), 7), [days[i] for i in range(0, len(days), 7)])
    right.set_ylabel("log10 mean L1 forecast error")
    right.set_title("every target day, mean over trials", fontsize=9)
    right.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return save(fig, path, footer, dpi=80)
