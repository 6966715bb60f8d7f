"""Dataset loaders: hand-written fixtures with worked answers, and the real shared samples."""

from __future__ import annotations

import csv
import gzip
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from app.bench.engine import datasets
from app.bench.engine.datasets import Dataset, load, load_checkins, load_msnbc, load_tdrive
from app.bench.engine.datasets import msnbc as msnbc_module
from app.bench.engine.datasets.base import fill_slots, parse_duration
from app.bench.engine.datasets.synthetic import load_synthetic, probabilities
from app.bench.engine.datasets.tdrive import default_dir
from tests.bench.stubs import shrink_quick, skip_rendering

FIXTURES = Path(__file__).parent / "fixtures"
CHECKINS, POIS = FIXTURES / "checkins.tsv", FIXTURES / "pois.tsv"
TAXIS = FIXTURES / "tdrive"

TDRIVE_DIR = default_dir()
MSNBC_ZIP = msnbc_module.default_path()
needs_tdrive = pytest.mark.skipif(
    not TDRIVE_DIR.is_dir(),
    reason=f"T-Drive sample not found at {TDRIVE_DIR} (set DPSTREAM_DATA to the raw-data root)",
)
needs_msnbc = pytest.mark.skipif(
    not MSNBC_ZIP.is_file(),
    reason=f"msnbc zip not found at {MSNBC_ZIP} (set DPSTREAM_DATA to the raw-data root)",
)

# tests/bench/fixtures/tdrive, slots of 60 s from 13:30:44 (Beijing), 10 x 10 grid of 0.08 deg:
# taxi 1: slot 1 (116.05, 39.55) -> x0y0 = 0 (plus an exact duplicate);
#         slot 4 (116.75, 40.25) -> x9y9 = 99; slot 4 (117.5, 39.9) is outside the box.
# taxi 2: slot 0 (116.8, 40.3) -> upper edge, 99; slot 0 later (116.41, 39.91) -> x5y5 = 55;
#         slot 3 (116.09, 39.5) -> x1y0 = 10.
# 3.txt is empty and taxi 4 never enters the box. The last fix (13:35:00) is in slot 4: T = 5.
TAXI_EXPECTED = {
    "carry": [[0, 0, 0, 0, 99], [55, 55, 55, 10, 10]],
    "forward": [[-1, 0, 0, 0, 99], [55, 55, 55, 10, 10]],
    "absent": [[-1, 0, -1, -1, 99], [55, -1, -1, 10, -1]],
}


@pytest.mark.parametrize("missing", sorted(TAXI_EXPECTED))
def test_tdrive_fixture_cells_under_each_missing_policy(missing: str) -> None:
    ds = load_tdrive(TAXIS, missing=missing)
    assert ds.users == ("1", "2")
    assert (ds.T, ds.N, ds.d, ds.slot_s) == (5, 2, 100, 60)
    assert ds.values.T.tolist() == TAXI_EXPECTED[missing]
    assert ds.labels[55] == "x5y5"
    assert ds.options["fixes_read"] == 8
    assert ds.options["fixes_distinct"] == 7
    assert ds.options["fixes_in_box"] == 5


def test_tdrive_fixture_start_is_the_pwsm_code_start_in_utc() -> None:
    ds = load_tdrive(TAXIS)
    assert ds.start is not None
    assert ds.start.astimezone(UTC) == datetime(2008, 2, 2, 5, 30, 44, tzinfo=UTC)


def test_tdrive_fixture_slot_start_and_T_options() -> None:
    ds = load_tdrive(TAXIS, slot="2min", start="2008-02-02 13:31:44", T=3)
    # slots [13:31:44, 13:33:44), [13:33:44, 13:35:44), [13:35:44, ...): taxi 2's slot-0 fixes
    # precede the start and are carried in; its 13:33:44 fix opens slot 1.
    assert ds.values.T.tolist() == [[0, 99, 99], [55, 10, 10]]


def test_tdrive_fixture_regions() -> None:
    strips = load_tdrive(TAXIS, regions=5, region_map="strips", missing="absent")
    assert strips.d == 5 and strips.labels[0] == "strip0"
    # strips 0.16 deg wide: 116.05 -> 0, 116.75 -> 4, 116.41 -> 2, 116.09 -> 0
    assert strips.values.T.tolist() == [[-1, 0, -1, -1, 4], [2, -1, -1, 0, -1]]
    grid = load_tdrive(TAXIS)
    rand = load_tdrive(TAXIS, regions=5, region_seed=3)
    cell_region = np.random.default_rng(3).integers(0, 5, 100)
    assert np.array_equal(rand.values, cell_region[grid.values])


def test_tdrive_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="grid"):
        load_tdrive(TAXIS, grid=0)
    with pytest.raises(ValueError, match="region_map"):
        load_tdrive(TAXIS, regions=5, region_map="kmeans")
    with pytest.raises(ValueError, match="missing"):
        load_tdrive(TAXIS, missing="zero")
    with pytest.raises(FileNotFoundError):
        load_tdrive(FIXTURES / "nowhere")


@pytest.fixture(scope="module")
def tdrive() -> Dataset:
    return load_tdrive()


@needs_tdrive
def test_tdrive_sample_default_is_the_pwsm_setting(tdrive: Dataset) -> None:
    # SOURCE.md: 794,484 distinct rows, 8,889 one-minute slots, 99 of 100 cells non-empty.
    assert tdrive.options["fixes_distinct"] == 794_484
    assert tdrive.T == 8_889
    assert tdrive.d == 100
    assert tdrive.N == 593  # 598 non-empty files; 5 taxis never enter the box
    assert tdrive.values.min() >= 0 and tdrive.values.max() < 100  # carry: everyone, always
    hist = tdrive.histograms()
    assert (hist.sum(axis=1) == tdrive.N).all()
    assert int((hist.sum(axis=0) > 0).sum()) == 99


@needs_tdrive
def test_tdrive_sample_absent_policy_matches_reporting_rate(tdrive: Dataset) -> None:
    absent = load_tdrive(missing="absent", regions=5, slot="10min")
    assert absent.T == 889  # SOURCE.md: ten-minute slots span 889
    per_slot = absent.histograms().sum(axis=1).mean()
    assert 300 < per_slot < 380  # SOURCE.md: about 338 taxis report per 10-minute slot
    assert absent.users == tdrive.users


def test_checkins_fixture_carry() -> None:
    ds = load_checkins(CHECKINS, POIS, regions=2, slot="1h")
    # POI longitudes 10, 20 | 30, 40 (cut at the median 25). Slots of 1 h from alice's first
    # check-in. bob's first check-in (slot 1, p4) is backfilled into slot 0, then p2 wins slot 1.
    assert ds.users == ("alice", "bob", "carol")  # dave checked in at an unknown POI only
    assert ds.values.T.tolist() == [[0, 0, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert ds.start == datetime.fromtimestamp(1_000_000_000, tz=UTC)
    assert ds.options["checkins_kept"] == 5


def test_checkins_fixture_absent_label_and_grid() -> None:
    absent = load_checkins(CHECKINS, POIS, regions=2, slot=3600, missing="absent")
    assert absent.values.T.tolist() == [[0, -1, 1, -1], [-1, 0, -1, -1], [-1, -1, -1, 0]]
    label = load_checkins(CHECKINS, POIS, partition="label", slot="1h")
    assert label.labels == ("AA", "BB", "CC") and label.d == 3
    assert label.values.T.tolist() == [[0, 0, 1, 1], [2, 0, 0, 0], [0, 0, 0, 0]]
    grid = load_checkins(CHECKINS, POIS, partition="grid", regions=4, slot="1h")
    assert grid.values.T.tolist() == [[0, 0, 3, 3], [3, 0, 0, 0], [0, 0, 0, 0]]


def test_checkins_slot_and_start_options() -> None:
    ds = load_checkins(CHECKINS, POIS, regions=2, slot="100min", start="2001-09-09T01:00:00")
    # start 2,800 s before the first check-in: alice's second check-in (+7,300 s) falls in
    # slot 1, bob's in slot 1, carol's (+10,800 s) in slot 2, so T = 3.
    assert (ds.T, ds.slot_s) == (3, 6000)
    assert ds.values.T.tolist() == [[0, 1, 1], [1, 0, 0], [0, 0, 0]]


def test_checkins_user_sampling_is_seeded() -> None:
    a = load_checkins(CHECKINS, POIS, slot="1h", user_fraction=0.5, seed=2)
    b = load_checkins(CHECKINS, POIS, slot="1h", user_fraction=0.5, seed=2)
    # default_rng(2).random(3) < 0.5 keeps the first two users in id order
    assert a.users == b.users == ("alice", "bob")
    assert np.array_equal(a.values, b.values)
    assert a.options["seed"] == 2 and a.options["user_fraction"] == 0.5
    with pytest.raises(ValueError, match="no check-ins"):  # default_rng(4) keeps nobody
        load_checkins(CHECKINS, POIS, user_fraction=0.5, seed=4)


def test_checkins_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="perfect square"):
        load_checkins(CHECKINS, POIS, partition="grid", regions=5)
    with pytest.raises(ValueError, match="partition"):
        load_checkins(CHECKINS, POIS, partition="country")
    with pytest.raises(ValueError, match="slot"):
        load_checkins(CHECKINS, POIS, slot="soon")


def test_registry_loads_by_name() -> None:
    ds = load("checkins", checkins=CHECKINS, pois=POIS, regions=2, slot="100min")
    assert ds.name == "checkins" and ds.slot_s == 6000
    assert set(datasets.names()) >= {"tdrive", "checkins", "msnbc", "synthetic", "tlns", "sin"}
    assert load("tdrive", path=TAXIS).N == 2


def _toy_zip(path: Path, sessions: list[str]) -> Path:
    text = "% Different categories found in input file:\r\n\r\na b c\r\n\r\n% Sequences:\r\n\r\n"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("toy.seq", text + "".join(s + " \r\n" for s in sessions))
        zf.writestr("__MACOSX/._toy.seq", "resource fork")
    return path


def test_msnbc_toy_zip_policies_and_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zpath = _toy_zip(tmp_path / "toy.zip", ["1 3", "2", "3 3 1"])
    ds = load_msnbc(zpath)
    assert ds.labels == ("a", "b", "c") and (ds.T, ds.N, ds.d) == (3, 3, 3)
    assert ds.values.T.tolist() == [[0, 2, -1], [1, -1, -1], [2, 2, 0]]
    assert load_msnbc(zpath, missing="carry").values.T.tolist()[1] == [1, 1, 1]
    assert load_msnbc(zpath, max_users=2, max_slots=1).values.T.tolist() == [[0], [1]]
    monkeypatch.setattr(msnbc_module, "MAX_CELLS", 8)
    with pytest.raises(ValueError, match="max_users"):
        load_msnbc(zpath)


@needs_msnbc
def test_msnbc_first_sessions_decode_in_header_order() -> None:
    ds = load_msnbc(max_users=5, max_slots=4)
    assert ds.labels[:4] == ("frontpage", "news", "tech", "local") and ds.d == 17
    # file lines: "1 1", "2", "3 2 2 4 2 2 2 3 3", "5", "1"
    names = [[ds.labels[v] if v >= 0 else None for v in col] for col in ds.values.T]
    assert names[0] == ["frontpage", "frontpage", None, None]
    assert names[2] == ["tech", "news", "news", "local"]
    assert names[3][0] == "opinion" and names[4][0] == "frontpage"


def test_synthetic_paper_sizes_and_rules() -> None:
    assert load_synthetic("sin", paper="pldp-ids", N=10, T=7).values.shape == (7, 10)
    ds = load_synthetic("log", paper="ldp-ids", N=2000, T=50, seed=3)
    p = probabilities("log", 50, np.random.default_rng(3))
    assert (ds.histograms()[:, 1] == np.rint(p * 2000)).all()  # exactly round(p_t N) ones
    assert ds.options == {
        "stream": "log",
        "paper": "ldp-ids",
        "draw": "exact",
        "seed": 3,
        "code_compat": False,
    }
    assert load("tlns", N=5, T=5).options["paper"] == "pwsm"
    with pytest.raises(ValueError, match="paper"):
        load_synthetic("sin", paper="kellaris")


def test_synthetic_code_compat_rounds_to_two_decimals() -> None:
    p = probabilities("sin", 100, np.random.default_rng(0), code_compat=True)
    assert np.array_equal(p, np.round(p, 2))


def test_fill_slots_drops_records_outside_the_slots() -> None:
    user, slot, value = np.array([0, 0, 0]), np.array([-2, 1, 9]), np.array([3, 4, 5])
    assert fill_slots(user, slot, value, 3, 1, "carry").ravel().tolist() == [3, 4, 4]
    assert fill_slots(user, slot, value, 3, 1, "absent").ravel().tolist() == [-1, 4, -1]


def test_dataset_is_read_only_and_validated() -> None:
    ds = Dataset("x", np.array([[0, 1]]), 2, ("a", "b"), 1, None, ("u", "v"), "absent", "")
    with pytest.raises(ValueError, match="read-only"):
        ds.values[0, 0] = 1
    with pytest.raises(ValueError, match="lie in"):
        Dataset("x", np.array([[0, 2]]), 2, ("a", "b"), 1, None, ("u", "v"), "absent", "")
    with pytest.raises(ValueError, match="slot"):
        parse_duration("0s")


def test_a_public_data_set_missing_from_the_data_root_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path))
    (tmp_path / "tdrive_sample600" / "taxi_log_2008_by_id").mkdir(parents=True)  # empty
    assert datasets.missing("tdrive") and datasets.missing("msnbc")
    assert not datasets.missing("sin")  # generated: never missing
    with pytest.raises(datasets.DatasetMissing) as info:
        load("tdrive")
    line = str(info.value)
    assert "\n" not in line and "DPSTREAM_DATA" in line and "docs/datasets.md" in line
    assert str(tmp_path / "tdrive_sample600") in line
    with pytest.raises(datasets.DatasetMissing, match="msnbc not found"):
        load("msnbc")
    (tmp_path / "tdrive_sample600" / "taxi_log_2008_by_id" / "1.txt").write_text("")
    assert not datasets.missing("tdrive")


def test_the_datasets_doc_names_every_public_data_set_and_its_layout() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "datasets.md").read_text()
    for name, path in datasets.PUBLIC_DATA.items():
        assert f"`{name}`" in doc and path in doc, name
    assert "DPSTREAM_DATA" in doc


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--preset", "pwsm-eps", "--dataset", "tdrive", "--quick"],
        ["bench", "pwsm", "--quick", "--dataset", "tdrive"],
        ["bench", "wn", "--quick", "--data", "msnbc"],
        ["bench", "optstream", "--quick", "--data", "rte2013"],
        ["bench", "results"],
        ["bench", "results", "--quick", "--reuse"],
    ],
)
def test_a_bench_verb_without_the_data_it_needs_says_so_in_one_line(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from app.cli import main

    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DPSTREAM_DATA" in err and "not found" in err


def test_bench_quick_runs_on_generated_data_without_the_public_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A clone has no data: the preset falls back to its first generated data set, saying so."""
    from app.cli import main

    shrink_quick(monkeypatch)
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "--preset", "pwsm-eps", "--quick", "--jobs", "1", "--out", "out"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "tdrive not found" in err and "running on tlns instead" in err
    assert (tmp_path / "out" / "results.csv").read_text().count("\n") > 1


@pytest.mark.parametrize("paper", ["pwsm", "ldp-ids"])
def test_a_paper_verb_quick_skips_its_runs_on_missing_public_sets(
    paper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from app.cli import main

    shrink_quick(monkeypatch)
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    argv = ["bench", paper, "--quick", "--figure", "eps", "--jobs", "1", "--out", "out"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "tdrive not found" in captured.err and "generated data instead" in captured.err
    ran = {p.name for p in (tmp_path / "out").iterdir()}
    assert ran and not any("tdrive" in name for name in ran)
    assert "tdrive" not in captured.out and f"{paper}-eps on sin" in captured.out


def test_bench_wn_quick_runs_on_generated_trajectories_without_the_public_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A clone has no msnbc, T-Drive or Diginetica: bench wn runs its generated stand-ins (on
    their first 48 slots: what runs matters here, not the numbers)."""
    from app.bench.wn.generated import GENERATED
    from app.cli import main

    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "wn", "--quick", "--slots", "48", "--out", "out"]) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if "DPSTREAM_DATA" in line]
    assert len(note) == 1 and "msnbc, tdrive, diginetica not found" in note[0]
    with (tmp_path / "out" / "trajectory.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["dataset"] for r in rows} == set(GENERATED)
    assert {r["figure"] for r in rows} == {"fig8", "fig9", "fig10"}
    assert all(float(r["mae"]) >= 0 and float(r["mre"]) >= 0 for r in rows)
    assert len(list((tmp_path / "out").glob("trajectory-gen-*.png"))) == 2 * 3 * 2


def test_bench_results_quick_runs_on_generated_data_without_the_public_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A clone: the report's runs on generated data run, those on the public sets are left out.

    Cheap (issue 35: it took 177 s in CI): the grid's quick presets shrunk further, of the
    papers' stored runs only (w,n)'s (the one asserted on) on 48 slots, a cost sweep of two
    points an axis, the figures laid out but not rendered, the deterministic checks not run."""
    from app.bench.engine import cost
    from app.bench.engine.datasets import PUBLIC_DATA
    from app.bench.engine.runs import RUNS
    from app.bench.report import regenerate
    from app.bench.report import stored as stored_runs
    from app.cli import main

    shrink_quick(monkeypatch)
    skip_rendering(monkeypatch)
    runnable = stored_runs.runnable
    monkeypatch.setattr(stored_runs, "runnable", lambda: [s for s in runnable() if s.paper == "wn"])
    monkeypatch.setattr(regenerate, "run_checks", dict)
    verb_args = stored_runs.verb_args
    monkeypatch.setattr(stored_runs, "verb_args", lambda *a: [*verb_args(*a), "--slots", "48"])
    steps = cost.step_times
    small = {"d_values": (10, 100), "m_values": (1, 2), "n_values": (100, 1000)}
    monkeypatch.setattr(cost, "step_times", lambda out, **_: steps(out, **small))
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "results", "--quick", "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if "DPSTREAM_DATA" in line]
    assert len(note) == 1 and "generated data instead" in note[0]
    report = (tmp_path / "RESULTS.md").read_text()
    assert report.startswith("# RESULTS") and "were not under the data root" in report
    ran = {p.name for p in (tmp_path / "out" / "results").iterdir() if p.is_dir()}
    generated = {f"{name}-{ds}" for name, ds in RUNS if ds not in PUBLIC_DATA}
    assert ran == generated | {"quick-stored", "cost"}
    stored = tmp_path / "out" / "results" / "quick-stored"
    wn = stored / "wn" / "trajectory.csv.gz"
    with gzip.open(wn, "rt", newline="") as f:
        assert {r["dataset"] for r in csv.DictReader(f)} == {"gen-clicks", "gen-taxis"}
    assert not (stored / "wn" / "table1.csv.gz").exists()  # Table 1 needs the public sets
    assert "wn-table1" not in {s.key for s in runnable()}
