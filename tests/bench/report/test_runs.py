"""Running and reusing the report's runs; the machine is recorded when something runs."""

from __future__ import annotations

import json
from dataclasses import replace

from app.bench.engine import runs
from app.bench.engine.presets import resolve, write_tables


def _tiny():
    return replace(
        resolve("pwsm-eps", dataset="sin", quick=True), mechanisms=("bd",), eps_values=(0.6,)
    )


ROWS = [{"dataset": "sin", "mechanism": "bd", "eps": 0.6, "w": 120, "seed": 0, "amre": 2.5}]


def test_read_csv_types_the_numbers(tmp_path):
    write_tables(ROWS, tmp_path, _tiny(), 1.0)
    (row,) = runs.read_csv(tmp_path / "results.csv")
    assert row == ROWS[0] and isinstance(row["w"], int) and isinstance(row["amre"], float)


def test_run_all_records_the_machine_only_when_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "resolve", lambda *a, **k: _tiny())
    monkeypatch.setattr(
        runs,
        "run_preset",
        lambda preset, folder, **_: (write_tables(ROWS, folder, preset, 1.0) and ROWS, []),
    )
    assert runs.recorded_machine(tmp_path) is None
    done = runs.run_all(tmp_path, runs=[("pwsm-eps", "sin")], progress=False)
    assert done[("pwsm-eps", "sin")][1] == ROWS
    assert runs.recorded_machine(tmp_path) == runs.machine()
    assert set(json.loads((tmp_path / "runs.json").read_text())) == {"pwsm-eps-sin"}
    (tmp_path / runs.MACHINE_FILE).write_text(json.dumps({"platform": "earlier"}))
    monkeypatch.setattr(runs, "plot_preset", lambda *a: [], raising=False)
    again = runs.run_all(tmp_path, reuse=True, runs=[("pwsm-eps", "sin")], progress=False)
    assert again[("pwsm-eps", "sin")][1] == ROWS
    assert runs.recorded_machine(tmp_path) == {"platform": "earlier"}  # nothing ran: kept
