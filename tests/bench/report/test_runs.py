"""Running and reusing the report's runs; the record (command, commit, machine) is written
when something runs, and the rows are stored gzipped."""

from __future__ import annotations

import json
from dataclasses import replace

from app.bench.engine import runs, store
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


def test_run_all_records_the_run_only_when_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, "resolve", lambda *a, **k: _tiny())
    monkeypatch.setattr(
        runs,
        "run_preset",
        lambda preset, folder, **_: (write_tables(ROWS, folder, preset, 1.0) and ROWS, []),
    )
    assert runs.recorded_machine(tmp_path) is None
    done = runs.run_all(tmp_path, runs=[("pwsm-eps", "sin")], progress=False)
    assert done[("pwsm-eps", "sin")][1] == ROWS
    assert runs.recorded_machine(tmp_path) == store.machine()
    ((key, entry),) = json.loads((tmp_path / "runs.json").read_text()).items()
    assert key == "pwsm-eps-sin"
    assert entry["command"] == (f"dpstream bench pwsm --figure eps --dataset sin --out {tmp_path}")
    assert entry["commit"] == store.commit() and entry["wall_s"] >= 0
    folder = tmp_path / "pwsm-eps-sin"
    assert (folder / "results.csv.gz").exists() and not (folder / "results.csv").exists()
    log = store.records(tmp_path)
    log["pwsm-eps-sin"]["machine"] = {"platform": "earlier"}
    store.write_records(tmp_path, log)
    monkeypatch.setattr(runs, "plot_preset", lambda *a: [], raising=False)
    again = runs.run_all(tmp_path, reuse=True, runs=[("pwsm-eps", "sin")], progress=False)
    assert again[("pwsm-eps", "sin")][1] == ROWS
    assert runs.recorded_machine(tmp_path) == {"platform": "earlier"}  # nothing ran: kept


def test_recorded_machines_groups_the_runs_by_machine(tmp_path):
    a, b = {"platform": "a"}, {"platform": "b"}
    store.write_records(
        tmp_path, {"r1": {"machine": a}, "r2": {"machine": b}, "r3": {"machine": a}, "r4": {}}
    )
    assert runs.recorded_machines(tmp_path, ["r1", "r2", "r3", "r4", "absent"]) == [
        (a, ["r1", "r3"]),
        (b, ["r2"]),
    ]


def test_gzip_file_gives_the_same_bytes_for_the_same_rows(tmp_path):
    made = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write_tables(ROWS, tmp_path / name, _tiny(), 1.0)
        made.append(store.gzip_file(tmp_path / name / "results.csv").read_bytes())
    assert made[0] == made[1]
    assert runs.read_csv(tmp_path / "a" / "results.csv") == ROWS  # read through the .gz
