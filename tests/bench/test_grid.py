"""The bench grid on a tiny synthetic stream: every row recorded, measures sane, files written."""

from __future__ import annotations

import csv

import pytest

from app.bench.engine.grid import Grid, assign, run_grid, write_results
from app.cli import main
from app.dp.types import Group


def tiny(**kw):
    return Grid(
        dataset="sin",
        mechanisms=("uniform", "pba"),
        eps_values=(0.6, 1.0),
        w_values=(40,),
        seeds=(0, 1),
        dataset_options={"N": 300, "T": 60},
        **kw,
    )


def test_grid_rows_and_files(tmp_path):
    grid = tiny()
    rows = run_grid(grid, jobs=1, progress=False)
    assert len(rows) == 2 * 2 * 1 * 2
    assert {(r["mechanism"], r["eps"], r["seed"]) for r in rows} == {
        (m, e, s) for m in ("uniform", "pba") for e in (0.6, 1.0) for s in (0, 1)
    }
    assert all(r["amre"] > 0 and 0 <= r["fresh"] <= 1 for r in rows)
    assert all(r["fresh"] == 1.0 for r in rows if r["mechanism"] == "uniform")
    csv_path, md_path = write_results(rows, tmp_path, grid)
    with csv_path.open() as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert "| sin | 0.6 | 40 |" in md_path.read_text()


def test_uniform_error_matches_its_variance():
    """Uniform's AMRE is its Laplace variance 2 (w/eps)^2, within sampling error."""
    rows = run_grid(tiny(setting="single"), jobs=1, progress=False)
    for r in (r for r in rows if r["mechanism"] == "uniform"):
        expected = 2 * (r["w"] / r["eps"]) ** 2
        # 60 slots x 2 cells: the mean of 120 squared Laplace draws; sd = sqrt(20) b^2 / sqrt(120)
        assert r["amre"] == pytest.approx(expected, rel=4 * (20**0.5 / 2) / 120**0.5)


@pytest.mark.parametrize(
    ("setting", "groups"),
    [
        ("two-eps", (Group(120, 1.0), Group(120, 0.6))),
        ("two-w", (Group(40, 0.6), Group(120, 0.6))),
        ("single", (Group(120, 0.6),)),
    ],
)
def test_two_group_settings(setting, groups):
    got, type_group = assign(tiny(setting=setting), 0.6, 120, seed=0)
    assert got == groups
    assert type_group.count(0) == (5 if len(groups) == 2 else 10)


def test_types_setting_draws_from_the_grid():
    groups, _ = assign(tiny(), 0.6, 120, seed=3)
    assert all(g.eps >= 0.6 and g.w <= 120 for g in groups)


def test_cli_bench_and_replay(tmp_path, capsys):
    assert (
        main(
            [
                "bench",
                "--dataset",
                "log",
                "--mechanisms",
                "bd,pbd",
                "--slots",
                "30",
                "--users",
                "200",
                "--seeds",
                "1",
                "--jobs",
                "1",
                "--w",
                "10",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert (tmp_path / "results.csv").exists()
    assert main(["bench", "replay", "--slots", "5", "--users", "100"]) == 0
    assert capsys.readouterr().out.count("slot ") >= 5
