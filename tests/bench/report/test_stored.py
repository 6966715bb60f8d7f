"""The papers' stored runs: run only what --reuse lacks, record what ran, read .csv or .gz."""

from __future__ import annotations

import gzip
import json
import os

from app.bench.engine.store import RUNS_FILE, Stored, commit, machine, read_rows, verb_args
from app.bench.engine.store import find as latest
from app.bench.report.stored import ensure

SPECS = (
    Stored("a", "optstream", "a", "out.csv", ("--figure", "8")),
    Stored("b", "optstream", "b", "out.csv", ("--figure", "4")),
)


def _fake(ran):
    def produce(spec, root, quick):
        ran.append((spec.key, quick))
        (root / spec.folder).mkdir(parents=True, exist_ok=True)
        (root / spec.folder / spec.output).write_text("x,y\n1,2\n")

    return produce


def test_reuse_runs_only_the_missing_and_records_its_command(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "out.csv").write_text("x\n1\n")
    ran: list[tuple[str, bool]] = []
    done = ensure(tmp_path, reuse=True, specs=SPECS, produce=_fake(ran))
    assert ran == [("b", False)]
    log = json.loads((tmp_path / RUNS_FILE).read_text())
    assert list(log) == ["b"] and log["b"]["command"].endswith(f"--figure 4 --out {tmp_path}/b")
    assert done["a"].path == tmp_path / "a" / "out.csv" and done["a"].wall_s != done["a"].wall_s
    assert done["b"].wall_s >= 0 and done["b"].load is not None
    assert log["b"]["commit"] == commit() and log["b"]["machine"] == machine()


def test_without_reuse_everything_runs_again(tmp_path):
    ran: list[tuple[str, bool]] = []
    ensure(tmp_path, specs=SPECS, produce=_fake(ran))
    ensure(tmp_path, quick=True, specs=SPECS, produce=_fake(ran))
    assert ran == [("a", False), ("b", False), ("a", True), ("b", True)]
    command = json.loads((tmp_path / RUNS_FILE).read_text())["a"]["command"]
    assert command == f"dpstream bench optstream --figure 8 --quick --out {tmp_path}/a"


def test_quick_drops_the_stored_sizes_for_the_verbs_quick_profile():
    pldp = Stored("p", "pldp", ".", "x.csv", ("--seeds", "2", "--slots", "1000", "--x", "1"))
    assert verb_args(pldp, quick=False) == ["--seeds", "2", "--slots", "1000", "--x", "1"]
    assert verb_args(pldp, quick=True) == ["--x", "1", "--quick"]


def test_latest_prefers_the_newer_of_csv_and_gz(tmp_path):
    assert latest(tmp_path / "out.csv") is None
    with gzip.open(tmp_path / "out.csv.gz", "wt") as fh:
        fh.write("x\nold\n")
    (tmp_path / "out.csv").write_text("x\nnew\n")
    os.utime(tmp_path / "out.csv.gz", (1, 1))
    newest = latest(tmp_path / "out.csv")
    assert newest == tmp_path / "out.csv" and read_rows(newest) == [{"x": "new"}]
    os.utime(tmp_path / "out.csv", (0, 0))
    assert read_rows(latest(tmp_path / "out.csv")) == [{"x": "old"}]
