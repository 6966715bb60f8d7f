"""Every verdict recomputable from a clone: ``dpstream bench results --reuse`` rebuilds
RESULTS.md byte-identical from the run store in ``docs/results`` alone, with no public data set
(issue 35 §2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.bench.cli import stored_complete
from app.bench.engine.runs import ROWS, RUNS
from app.bench.engine.store import find
from app.bench.report.stored import STORED
from app.cli import main

REPO = Path(__file__).resolve().parents[3]
STORE = REPO / "docs" / "results"


def _missing() -> list[str]:
    grid = [f"{n}-{d}" for n, d in RUNS if not find(STORE / f"{n}-{d}" / ROWS)]
    papers = [s.key for s in STORED if not find(STORE / s.folder / s.output)]
    cost = [] if find(STORE / "cost" / "cost_slopes.csv") else ["cost"]
    return grid + papers + cost


@pytest.mark.skipif(
    not stored_complete(STORE, STORE, STORE / "cost"),
    reason="the run store lacks runs RESULTS.md reads (run `dpstream bench results --reuse` "
    "with the public data sets to store them): " + ", ".join(_missing()),
)
def test_results_reuse_rebuilds_results_md_byte_identical_without_data(tmp_path, monkeypatch):
    clone = tmp_path / "clone"
    shutil.copytree(STORE, clone / "docs" / "results")
    for shared in ("tests", "pyproject.toml"):  # the deterministic checks run their tests
        (clone / shared).symlink_to(REPO / shared)
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path / "no-data"))  # no public set at all
    monkeypatch.setattr("app.bench.engine.plots.plot_preset", lambda *a, **k: [])
    monkeypatch.chdir(clone)
    assert main(["bench", "results", "--reuse"]) == 0
    assert (clone / "RESULTS.md").read_bytes() == (REPO / "RESULTS.md").read_bytes()
