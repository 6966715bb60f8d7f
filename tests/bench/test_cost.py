"""Cost benchmarks: a tiny grid runs end to end and writes its tables (no timing assertions)."""

from __future__ import annotations

import csv
from pathlib import Path

from app.bench.engine.cost import groups_for, step_times, tdrive_replay

TAXIS = Path(__file__).parent / "fixtures" / "tdrive"


def test_step_times_tiny_grid_writes_csv_and_plots(tmp_path: Path) -> None:
    rows = step_times(
        tmp_path,
        mechanisms=["uniform", "pba"],
        d_values=(2, 4),
        m_values=(1, 2),
        n_values=(10, 20),
        base_d=3,
        base_m=2,
        base_n=10,
        slots=3,
        repeats=1,
        seed=5,
    )
    assert len(rows) == 2 * 3 * 2  # mechanisms x axes x points
    with (tmp_path / "cost_steps.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == len(rows)
    assert {r["axis"] for r in table} == {"d", "m", "N"}
    assert all(r["seed"] == "5" and float(r["step_s"]) > 0 for r in table)
    assert [(r["d"], r["m"], r["N"]) for r in table if r["axis"] == "m"][:2] == [
        ("3", "1", "10"),
        ("3", "1", "10"),
    ]
    with (tmp_path / "cost_slopes.csv").open() as fh:
        slopes = list(csv.DictReader(fh))
    assert len(slopes) == 2 * 3
    assert {"slope", "slope_top", "limit", "holds", "cpus"} <= set(slopes[0])
    assert all((tmp_path / f"cost_{axis}.png").stat().st_size > 0 for axis in ("d", "m", "N"))


def test_tdrive_replay_on_fixture_writes_one_row_per_mechanism(tmp_path: Path) -> None:
    rows = tdrive_replay(tmp_path, path=TAXIS, m=2, seed=1)
    assert [r["mechanism"] for r in rows] == ["uniform", "sample", "bd", "ba", "pbd", "pba"]
    assert all((r["T"], r["N"], r["d"], r["m"]) == (5, 2, 100, 2) for r in rows)
    assert rows[0]["publications"] == 5  # Uniform publishes every slot
    assert (tmp_path / "tdrive_replay.csv").read_text().count("\n") == 7


def test_groups_cycle_the_pwsm_grid() -> None:
    groups = groups_for(10)
    assert {g.w for g in groups} == {40, 80, 120}
    assert {g.eps for g in groups} == {0.6, 0.8, 1.0}
