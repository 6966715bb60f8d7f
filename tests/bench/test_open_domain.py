"""``dpstream bench open-domain`` (issue 36 §4): the quick preset on generated data, the
measures on hand-made cases, the bounding, and verdicts computed from the rows."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.bench.open_domain import data, report
from app.bench.open_domain.measures import mae, precision, recall
from app.bench.open_domain.run import METHODS, measure
from app.cli import main


def test_quick_preset_runs_on_generated_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path / "no-data"))  # no public data needed
    out = tmp_path / "run"
    began = time.perf_counter()
    assert main(["bench", "open-domain", "--quick", "--out", str(out)]) == 0
    assert time.perf_counter() - began < 20
    rows, meta = report.read(out)
    assert {r["method"] for r in rows} == set(METHODS)
    assert len(rows) == len(METHODS) * 3 * 2  # eps 1, 4, 16 x w 2, 8; one seed, one trial
    assert all(r["status"] == "ok" and r["dataset"] == "gen-keys" for r in rows)
    assert meta["command"].startswith("dpstream bench open-domain") and meta["machine"]
    # the labelled baseline releases the run's whole (bounded) key set at every slot
    events = data.generated()
    prep = np.random.default_rng([0, 2**20])
    labels = data.domain([data.bounded(s, 1, prep) for s in events.slots])
    assert {float(r["released"]) for r in rows if r["method"] == "label_uniform"} == {
        float(labels.size)
    }
    # per-slot thresholding releases only keys that someone sent in the slot
    assert all(float(r["precision"]) == 1.0 for r in rows if r["method"] == "threshold")
    assert (out / "open-domain-gen-keys.png").stat().st_size > 0
    lines = report.section(out, tmp_path)
    assert any(line.startswith("| 16 | 2 | `open_uniform`") for line in lines)
    assert "![open-domain on gen-keys](run/open-domain-gen-keys.png)" in lines


def test_full_preset_refuses_missing_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path))
    assert main(["bench", "open-domain", "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_measures_on_hand_made_cases():
    true = {"a": 10, "b": 5, "c": 1, "d": 1}
    # top-2 true is {a, b}; released top-2 is {a, z}: one of two found
    released = {"a": 9.0, "z": 7.0, "c": 2.0}
    assert recall(true, released, 2) == 0.5
    assert recall(true, released, 10) == 2 / 4  # only 4 true keys: a and c found
    assert precision(true, released) == 2 / 3  # z was sent by nobody
    # union {a, b, c, d, z}: |9-10| + |0-5| + |2-1| + |0-1| + |7-0| = 15
    assert mae(true, released) == 15 / 5
    assert math.isnan(precision(true, {})) and math.isnan(recall({}, released, 10))
    assert recall(true, {}, 10) == 0.0
    assert recall(true, {"a": 0.0, "b": -1.0}, 10) == 0.0  # zeros rank nothing
    # ties broken by key: true top-1 of {x: 3, y: 3} is x
    assert recall({"x": 3, "y": 3}, {"y": 3.0}, 1) == 0.0
    assert recall({"x": 3, "y": 3}, {"x": 1.0}, 1) == 1.0


def test_measure_averages_only_slots_with_true_keys():
    trues = [{"a": 2}, {}, {"b": 4}]
    rel = [{"a": 2.0}, {"q": 5.0}, {}]
    m = measure(trues, rel)
    assert m["recall10"] == 0.5 and m["precision"] == 1.0  # slot 3 released nothing
    assert m["mae"] == 2.0 and m["mae_true"] == 2.0 and m["released"] == 0.5


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.integers(1, 50), min_size=1))
def test_releasing_the_truth_is_perfect(true: dict[str, int]):
    exact = {k: float(v) for k, v in true.items()}
    assert recall(true, exact, 10) == 1.0 and recall(true, exact, 100) == 1.0
    assert precision(true, exact) == 1.0 and mae(true, exact) == 0.0
    assert 0.0 <= recall(true, {"~": 1e9}, 10) <= 1.0


@given(st.integers(1, 3), st.integers(0, 2**32))
def test_bounding_keeps_at_most_max_keys_of_each_users_own_keys(max_keys: int, seed: int):
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 20, 200)
    keys = rng.integers(0, 15, 200).astype(str)
    out = data.bounded(data.Slot(users, keys), max_keys, np.random.default_rng(seed))
    pairs = set(zip(out.users.tolist(), out.keys.tolist(), strict=True))
    assert len(pairs) == out.users.size  # each kept pair once
    assert pairs <= set(zip(users.tolist(), keys.tolist(), strict=True))
    _, per_user = np.unique(out.users, return_counts=True)
    assert per_user.max() <= max_keys
    for u in np.unique(users):  # a user keeps min(max_keys, its distinct keys)
        assert (out.users == u).sum() == min(max_keys, np.unique(keys[users == u]).size)


def _rows(open_r10: float, label_r10: float, open_r100: float, thr_r100: float) -> list[dict]:
    base = {"dataset": "ds", "eps": "4.0", "w": "2", "status": "ok", "tau": "8"}
    cells = {
        "open_uniform": (open_r10, open_r100, 5.0, 1.0),
        "label_uniform": (label_r10, 0.9, 100.0, 2.0),
        "threshold": (open_r10, thr_r100, 3.0, 1.5),
        "open_pba": (open_r10 + 0.05, 0.1, 4.0, 1.2),
    }
    return [
        base
        | {"method": m, "recall10": str(a), "recall100": str(b), "released": str(n)}
        | {"precision": "1.0", "mae": str(e), "mae_true": str(e)}
        | {"true_keys": "40", "top_count": "12"}
        for m, (a, b, n, e) in cells.items()
    ]


def test_verdicts_are_computed_from_the_rows():
    text = "\n".join(report.verdicts(report.means(_rows(0.5, 0.9, 0.3, 0.2))))
    assert "is +40 to +40 points" in text  # price: 0.9 - 0.5
    assert "(1 of 1 settings), the open one is within 10 points in 0." in text
    assert "MAE on the true keys, open over labelled, x0.5 to x0.5." in text
    assert "higher by more than a point in 1 of 1 (eps 4 w 2), lower in 0" in text  # 0.3 > 0.2
    assert "MAE on the true keys lower in 1 of 1" in text  # 1.0 < 1.5
    assert "precision 1.00 to 1.00 against 1.00 to 1.00" in text
    assert "point in 1 of 1 settings where `open_uniform`" in text  # open_pba 0.55 > 0.5
    assert "selects at tau 8 against 8" in text
    flipped = "\n".join(report.verdicts(report.means(_rows(0.85, 0.9, 0.1, 0.2))))
    assert "the open one is within 10 points in 1 (eps 4 w 2)" in flipped
    assert "higher by more than a point in 0 of 1, lower in 1" in flipped


def test_verdict_says_when_no_key_was_released():
    rows = _rows(0.0, 0.9, 0.0, 0.0)
    for r in rows:
        if r["method"] in ("open_uniform", "threshold", "open_pba"):
            r["released"] = "0"
    text = "\n".join(report.verdicts(report.means(rows)))
    assert "releases under 1 key per slot in 1 of 1 settings (eps 4 w 2)" in text
    assert "largest true count in a slot averages 12.0 (over 40.0 keys sent per slot)" in text
    assert "against tau 8." in text
    assert "neither `open_uniform` nor `threshold` released 1 key per slot" in text


def test_section_without_a_stored_run_says_not_run(tmp_path: Path):
    lines = report.section(tmp_path / "none", tmp_path)
    assert lines[0] == report.HEADING and any(line.startswith("Not run") for line in lines)


def test_the_verbs_preset_names_are_the_presets() -> None:
    """``--help`` names the presets without importing them (numpy): the two lists agree."""
    from app.bench.open_domain.cli import FIGURES
    from app.bench.open_domain.run import PRESETS

    assert sorted(FIGURES) == sorted(PRESETS)
