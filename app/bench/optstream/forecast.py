"""OptStream Fig. 6 (claim H5): ARMA day-ahead forecasts on released streams against the real one.

Spec seed-001 §5.5: for each target day, fit ARMA(1,1) with a constant (statsmodels
``ARIMA(order=(1, 0, 1), trend="c")``) on the 4 weeks (28 x 48 slots) of a series before the
day, forecast its 48 slots, and score ``(1/48) sum |forecast - true|``; average over the days
and trials, log10. "Real" fits the true series; every other row fits one mechanism's release
of it (the Fig. 3 mechanisms of :mod:`app.bench.optstream.runs`, w-event private as the service
runs them, and OptStream with the paper's aligned periods, not private; eps = 0.1 as the spec's
resolution 21).

The paper forecasts every day of Feb/Jun/Oct 2016 for Auvergne-Rhône-Alpes; here ``rte2013``
(January and February 2013, see :mod:`app.bench.optstream.runs`) is released as one 59-day stream
and every day of February is a target (its 4 weeks before reach back into January).

``dpstream bench optstream --figure 6 [--trials N] [--out DIR]`` (or ``python -m
app.bench.optstream.forecast [--trials N] [--eps E] [--region R] [--out DIR]``)
prints the Markdown table (mean, and the standard error over trials of the per-trial means over
days); ``--out`` also writes ``forecast.csv`` (one row per series, trial and day) and
``fig6_forecast.png`` (the first target day's forecasts, from trial 0, and every day's error,
:func:`app.bench.optstream.plots.plot_forecast`).
"""

from __future__ import annotations

import csv
import math
import sys
import time
import warnings
from datetime import date, timedelta
from pathlib import Path

import numpy as np

from app.bench.optstream.plots import plot_forecast
from app.bench.optstream.runs import (
    ALIGNED_COLUMNS,
    FIG3,
    W,
    load_rte,
    released,
    with_periods,
)

TRAIN_DAYS = 28


def day_ahead(series: np.ndarray, day: int) -> np.ndarray:
    """ARMA(1,1) with a constant fitted on the ``TRAIN_DAYS`` days before ``day`` (0-based day
    index into ``series``); its forecast of that day's ``W`` slots."""
    from statsmodels.tsa.arima.model import ARIMA  # the bench extra, imported when fitting

    train = series[(day - TRAIN_DAYS) * W : day * W]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of noisy series
        fit = ARIMA(train, order=(1, 0, 1), trend="c").fit()
    return np.asarray(fit.forecast(W))


def forecasts(series: np.ndarray, days: range) -> np.ndarray:
    """``(len(days), W)``: the day-ahead forecast of each of ``days`` from ``series``."""
    return np.array([day_ahead(series, d) for d in days])


def run(
    x: np.ndarray,
    days: range,
    eps: float,
    trials: int,
    aligned: bool = False,
    extras: bool = True,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(errors, first)``: per series ("Real", then each Fig. 3 mechanism's release and, with
    ``extras``, OptStream's with aligned periods), the ``(trials, len(days))`` per-point mean
    |forecast - true| (one row for "Real") and the first target day's forecast (trial 0);
    ``aligned`` runs every release with aligned periods."""
    truth = np.rint(x)
    target = truth[days.start * W : days.stop * W].reshape(len(days), W)
    errors: dict[str, np.ndarray] = {}
    first: dict[str, np.ndarray] = {}
    sources: list[tuple[str, list[np.ndarray]]] = [("Real", [truth])]
    columns = {**FIG3, **(ALIGNED_COLUMNS if extras else {})}
    for label, (name, params) in columns.items():
        p = with_periods(params, aligned)
        sources.append((label, [released(name, p, x, eps, None, s) for s in range(trials)]))
    for label, series in sources:
        fc = [forecasts(s, days) for s in series]
        errors[label] = np.array([np.abs(f - target).mean(axis=1) for f in fc])
        first[label] = fc[0][0]
    return errors, first


def write_fig6(
    trials: int,
    out: Path | None,
    eps: float = 0.1,
    region: str = "Auvergne-Rhône-Alpes",
    aligned: bool = False,
    extras: bool = True,
) -> int:
    """Fig. 6 (``dpstream bench optstream --figure 6``): print its table; with ``out``, write
    ``forecast.csv`` and the figure there; ``aligned`` and ``extras`` as :func:`run`."""
    regions, jan = load_rte("2013-01")
    _, feb = load_rte("2013-02")
    x = np.concatenate([jan, feb])[:, regions.index(region)]
    first_day = len(jan) // W
    days = range(first_day, len(x) // W)
    labels = [str(date(2013, 1, 1) + timedelta(days=d)) for d in days]
    start = time.time()
    errors, first = run(x, days, eps, trials, aligned, extras)
    print(f"### Fig. 6: ARMA(1,1) day-ahead forecast, {region}, 2013-02, eps = {eps:g}")
    print("")
    print("| series | log10 mean L1 forecast error | mean L1 (MW) | standard error (MW) |")
    print("|---|---|---|---|")
    for label, errs in errors.items():
        per_trial = errs.mean(axis=1)
        se = per_trial.std(ddof=1) / math.sqrt(len(per_trial)) if len(per_trial) > 1 else 0.0
        mean = float(per_trial.mean())
        print(f"| {label} | {math.log10(mean):.3f} | {mean:.1f} | {se:.1f} |")
    print(f"\n{len(days)} days, {trials} trials, {time.time() - start:.0f} s", file=sys.stderr)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "forecast.csv", "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["region", "eps", "series", "seed", "day", "error"])
            for label, errs in errors.items():
                for seed, row in enumerate(errs):
                    for day, err in zip(labels, row, strict=True):
                        writer.writerow([region, eps, label, seed, day, f"{err:.3f}"])
        plot_forecast(
            np.rint(x[days.start * W : (days.start + 1) * W]),
            first,
            {label: errs.mean(axis=0) for label, errs in errors.items()},
            labels,
            out / "fig6_forecast.png",
            title=f"OptStream Fig. 6, ARMA(1,1) day-ahead forecast, {region}, "
            f"eps = {eps:g} ({trials} trials)",
            footer="rte2013 (RTE regions, Jan-Feb 2013) released as one stream; each February day "
            "forecast from the 28 days before; Real = fitted on the true series"
            + ("; every release with aligned periods (not private)" if aligned else ""),
        )
    return 0
