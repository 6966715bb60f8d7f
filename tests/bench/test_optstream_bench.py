"""OptStream bench pieces: the T-Drive regional counts, standard errors, tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from app.bench.optstream import runs as bench
from app.bench.optstream.tdrive import tdrive_regions


def test_tdrive_regions_count_each_reporting_taxi_once_per_half_hour(tmp_path: Path):
    (tmp_path / "1.txt").write_text(
        "1,2008-02-02 23:50:00,116.40,39.90\n"  # before the first slot: not counted
        "1,2008-02-03 00:05:00,116.40,39.90\n"  # centre, then the south-west corner:
        "1,2008-02-03 00:20:00,116.10,39.60\n"  # its last fix of slot 0 counts
        "1,2008-02-03 01:10:00,117.50,39.90\n"  # outside the box: not counted
    )
    (tmp_path / "2.txt").write_text(
        "2,2008-02-03 00:40:00,116.40,39.90\n"
        "2,2008-02-03 00:41:00,116.41,39.91\n"  # same slot, same region: once
        "2,2008-02-03 23:59:00,116.79,40.29\n"  # north-east corner, last slot of day 1
    )
    labels, x = tdrive_regions(grid=3, days=1, path=tmp_path)
    assert x.shape == (48, 9) and x.sum() == 3
    corner, centre, north_east = labels.index("x0y0"), labels.index("x1y1"), labels.index("x2y2")
    assert x[0, corner] == 1 and x[1, centre] == 1 and x[47, north_east] == 1


def test_standard_error_is_over_the_per_trial_means_of_the_regions():
    rows = [
        {
            "dataset": "d",
            "month": "m",
            "mechanism": "L",
            "eps": 1.0,
            "alpha": None,
            "region": region,
            "seed": seed,
            "error": err,
        }
        for seed, errs in enumerate([(1.0, 3.0), (4.0, 6.0), (1.0, 1.0)])
        for region, err in zip("ab", errs, strict=True)
    ]
    se = bench.standard_errors(rows)[("d", "m", "L", 1.0, None)]
    # per-trial means 2, 5, 1: sample deviation sqrt(13 / 3), over sqrt(3)
    assert se == pytest.approx(math.sqrt(13 / 3) / math.sqrt(3))
    assert math.isnan(bench.standard_errors(rows[:2])[("d", "m", "L", 1.0, None)])


def test_table_prints_the_standard_error_in_log10_units():
    key = ("d", "m", "L", 1.0, None)
    text = bench.table({key: 100.0}, ["L"], "t", {key: 100.0 * math.log(10) * 0.012})
    assert "| d | m | 1 | 1 | 2.00 ± 0.012 |" in text


def test_counts_series_run_with_delta_one():
    rng = np.random.default_rng(7)
    x = rng.poisson(40, size=(2 * 48, 2)).astype(np.float64)
    rows: list[dict] = []
    res = bench.run({"tdrive": {"2d": (["a", "b"], x)}}, bench.FIG3, [1.0], [None], 2, False, rows)
    assert len(rows) == 5 * 2 * 2
    se = bench.standard_errors(rows)
    assert all(se[k] >= 0 for k in res)
    # strict periods: the Laplace baseline's noise n has scale b = 2 w / eps = 96; releases
    # truncate at 0, so a count x ~ 40 errs by |n| above it and min(|n|, x) below it:
    # E = b / 2 + b (1 - exp(-x / b)) / 2 ~ 64 (aligned periods, b = 48: ~ 38), sd < 96, so
    # 5 standard errors over the 384 runs' slots are < 25
    assert 44 < res[("tdrive", "2d", "Laplace", 1.0, None)] < 85


def test_forecast_scores_every_series_trial_and_day_and_plots(tmp_path: Path, monkeypatch):
    from app.bench.optstream import forecast as fc
    from app.bench.optstream.plots import plot_forecast

    # a seasonal-naive forecaster in place of ARMA (fast): the day before, slot by slot
    monkeypatch.setattr(fc, "day_ahead", lambda series, day: series[(day - 1) * 48 : day * 48])
    monkeypatch.setattr(fc, "FIG3", {k: bench.FIG3[k] for k in ("Laplace", "OptStream_LS")})
    _, x = bench.synthetic_load(4, seed=5)
    errors, first = fc.run(x[:, 0], range(2, 4), 1.0, 3, extras=False)
    assert list(errors) == ["Real", "Laplace", "OptStream_LS"] and list(first) == list(errors)
    assert errors["Real"].shape == (1, 2) and errors["Laplace"].shape == (3, 2)
    truth = np.rint(x[:, 0])
    by_hand = [
        np.abs(truth[(d - 1) * 48 : d * 48] - truth[d * 48 : (d + 1) * 48]).mean() for d in (2, 3)
    ]
    assert errors["Real"][0] == pytest.approx(by_hand)
    assert np.array_equal(first["Real"], truth[48:96])
    # forecasting from a noisy release adds the release's noise (Laplace: ~w / eps = 48 MW)
    assert (errors["Laplace"].mean(axis=0) > errors["Real"][0]).all()
    png = plot_forecast(
        truth[2 * 48 : 3 * 48],
        first,
        {k: e.mean(axis=0) for k, e in errors.items()},
        ["day 3", "day 4"],
        tmp_path / "f.png",
        title="t",
        footer="f",
    )
    assert png.stat().st_size > 10_000


def test_visual_panels_hold_the_truth_and_every_release(tmp_path: Path):
    """Issue 25 item 3: the stream figures (2, 7, 9, 11) draw the true series and each
    mechanism's release per row value."""
    from app.bench.optstream import visuals as vis

    _, x = bench.synthetic_load(2, seed=3)
    columns = {k: bench.FIG3[k] for k in ("Laplace", "OptStream_LS")}
    rows = vis.panels(x[:, 0], "alpha", [10.0, 100.0], columns)
    assert list(rows) == [10.0, 100.0]
    assert list(rows[10.0]) == ["true", "Laplace", "OptStream_LS"]
    assert all(v.shape == (2 * 48,) for v in rows[100.0].values())
    png = vis.plot(rows, tmp_path / "f.png", axis="alpha", title="t", days=2)
    assert png.stat().st_size > 10_000


def test_from_csv_rebuilds_the_means_of_the_run(tmp_path: Path):
    """``--from-csv`` re-renders a stored run: its means are :func:`run`'s, to the bit."""
    import csv

    rng = np.random.default_rng(1)
    x = rng.poisson(30, size=(48, 2)).astype(np.float64)
    rows: list[dict] = []
    mechs = {k: bench.FIG3[k] for k in ("Laplace", "DFT")}
    res = bench.run({"t": {"m": (["a", "b"], x)}}, mechs, [1.0, 0.1], [None], 2, False, rows)
    path = tmp_path / "optstream.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert bench.row_means(bench.read_rows(path)) == res
