"""OptStream Fig. 6 (claim H5): ARMA day-ahead forecasts on released streams against the real one.

Spec seed-001 §5.5: for each target day, fit ARMA(1,1) with a constant (statsmodels
``ARIMA(order=(1, 0, 1), trend="c")``) on the 4 weeks (28 x 48 slots) of a series before the
day, forecast its 48 slots, and score ``(1/48) sum |forecast - true|``; average over the days
and trials, log10. "Real" fits the true series; every other row fits one mechanism's release
of it (the Fig. 3 mechanisms of :mod:`app.bench.optstream`, paper settings, eps = 0.1 as the
spec's resolution 21).

The paper forecasts every day of Feb/Jun/Oct 2016 for Auvergne-Rhône-Alpes; here ``rte2013``
(January and February 2013, see :mod:`app.bench.optstream`) is released as one 59-day stream
and every day of February is a target (its 4 weeks before reach back into January).

``python -m app.bench.optstream_forecast [--trials N] [--eps E] [--region R]`` prints the
Markdown table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np
from statsmodels.tsa.arima.model import ARIMA

from app.bench.optstream import FIG3, W, load_rte, released

TRAIN_DAYS = 28


def day_ahead(series: np.ndarray, day: int) -> np.ndarray:
    """ARMA(1,1) with a constant fitted on the ``TRAIN_DAYS`` days before ``day`` (0-based day
    index into ``series``); its forecast of that day's ``W`` slots."""
    train = series[(day - TRAIN_DAYS) * W : day * W]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of noisy series
        fit = ARIMA(train, order=(1, 0, 1), trend="c").fit()
    return np.asarray(fit.forecast(W))


def forecast_error(series: np.ndarray, truth: np.ndarray, days: range) -> float:
    """Mean over ``days`` of the per-point mean |forecast from ``series`` - ``truth``|."""
    errs = [np.abs(day_ahead(series, d) - truth[d * W : (d + 1) * W]).mean() for d in days]
    return float(np.mean(errs))


def run(x: np.ndarray, days: range, eps: float, trials: int) -> dict[str, float]:
    """Mean forecast error of "Real" and of each Fig. 3 mechanism (over ``trials`` releases)."""
    truth = np.rint(x)
    out = {"Real": forecast_error(truth, truth, days)}
    for label, (name, params) in FIG3.items():
        out[label] = float(
            np.mean(
                [
                    forecast_error(released(name, params, x, eps, None, s), truth, days)
                    for s in range(trials)
                ]
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.bench.optstream_forecast", description=__doc__
    )
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--region", default="Auvergne-Rhône-Alpes")
    args = parser.parse_args(argv)
    regions, jan = load_rte("2013-01")
    _, feb = load_rte("2013-02")
    x = np.concatenate([jan, feb])[:, regions.index(args.region)]
    first = len(jan) // W
    days = range(first, len(x) // W)
    start = time.time()
    res = run(x, days, args.eps, args.trials)
    print(f"### Fig. 6: ARMA(1,1) day-ahead forecast, {args.region}, 2013-02, eps = {args.eps:g}")
    print("")
    print("| series | log10 mean L1 forecast error | mean L1 (MW) |")
    print("|---|---|---|")
    for label, err in res.items():
        print(f"| {label} | {math.log10(err):.2f} | {err:.0f} |")
    print(f"\n{len(days)} days, {args.trials} trials, {time.time() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
