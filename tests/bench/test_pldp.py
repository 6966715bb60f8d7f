"""PLDP-IDS bench (issue 12 item 5): the paper's level mix, AMSE, the baselines' projection,
the sweeps' rows and CSV, the claims' verdicts on hand-made means, the plots."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from app.bench.engine.claims import Verdict
from app.bench.pldp import claims as pldp_claims
from app.bench.pldp import runs as pldp
from app.bench.pldp.plots import plot_all

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("eps", "w", "budgets", "windows"),
    [
        (1.5, 120, {1.5, 2.0, 2.5}, {40, 80, 120}),  # the default point (spec §6.2)
        (2.5, 120, {2.5}, {40, 80, 120}),  # only the windows are personalized
        (0.5, 40, {0.5, 1.0, 1.5, 2.0, 2.5}, {40}),  # only the budgets are personalized
    ],
)
def test_level_mix_is_the_papers_grid(eps, w, budgets, windows):
    levels, counts = pldp.level_mix(eps, w, 30_000, np.random.default_rng(0))
    assert {g.eps for g in levels} == budgets and {g.w for g in levels} == windows
    assert sum(counts) == 30_000 and len(levels) == len(budgets) * len(windows)
    # uniform over the grid: each count within 5 binomial sds of its mean
    k = len(levels)
    sd = (30_000 * (1 / k) * (1 - 1 / k)) ** 0.5
    assert all(abs(c - 30_000 / k) < 5 * sd for c in counts)


def test_point_rows_carry_their_parameters_and_projection_never_hurts():
    rows = pldp.point(
        "tlns",
        ["lpd", "lpa", "plpa+"],
        eps=1.0,
        w=8,
        seed=3,
        step=4,
        options={"users": 600, "slots": 40},
    )
    names = [r["mechanism"] for r in rows]
    assert names == ["lpd", "lpd-proj", "lpa", "lpa-proj", "plpa+"]
    for r in rows:
        assert (r["dataset"], r["eps"], r["w"], r["seed"], r["users"], r["slots"], r["d"]) == (
            "tlns",
            1.0,
            8,
            3,
            600,
            40,
            2,
        )
        assert r["amse"] >= 0
    by = {r["mechanism"]: r for r in rows}
    # the truth lies on the simplex, and projecting onto a convex set never moves away from it
    for base in pldp.BASELINES:
        assert by[f"{base}-proj"]["amse"] <= by[base]["amse"] + 1e-15
        assert by[f"{base}-proj"]["publications"] == by[base]["publications"]
    assert by["lpa"]["levels"] == 1 and by["plpa+"]["levels"] == 8  # {1, 1.5, 2, 2.5} x {4, 8}


def test_run_shares_the_default_point_and_the_csv_round_trips(tmp_path, monkeypatch):
    monkeypatch.setitem(pldp.SWEEPS, "eps", ((1.0, 1.5), (8,)))
    monkeypatch.setitem(pldp.SWEEPS, "w", ((1.5,), (4, 8)))
    calls = []
    real_point = pldp.point
    monkeypatch.setattr(pldp, "point", lambda *a, **k: calls.append(a[2:4]) or real_point(*a, **k))
    rows = pldp.run(
        ["sin"],
        ["eps", "w"],
        [0],
        ["lpa", "plpa"],
        {"sin": {"users": 300, "slots": 12}},
        step=4,
        progress=False,
    )
    assert sorted(calls) == [(1.0, 8), (1.5, 4), (1.5, 8)]  # (1.5, 8) once, in both sweeps
    assert {(r["sweep"], r["eps"], r["w"]) for r in rows} == {
        ("eps", 1.0, 8),
        ("eps", 1.5, 8),
        ("w", 1.5, 4),
        ("w", 1.5, 8),
    }
    assert pldp.read_csv(pldp.write_csv(rows, tmp_path / "r.csv")) == rows


def test_checkins_come_from_the_data_root_or_are_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("DPSTREAM_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="foursquare"):
        pldp.load_values("checkins", 0, {})
    (tmp_path / "foursquare").mkdir()
    for name in ("checkins.tsv", "pois.tsv"):
        shutil.copy(FIXTURES / name, tmp_path / "foursquare" / name)
    values, d = pldp.load_values("checkins", 0, {"regions": 2, "slot": 60})
    assert d == 2 and values.ndim == 2 and values.shape[1] >= 1
    assert ((values >= 0) & (values < d)).all()


def _rows(amse, datasets=("tdrive",), sweeps=("eps", "w")):
    """Rows with AMSE ``amse(mechanism, eps, w)`` at the sweeps' points, two seeds (+-1%)."""
    out = []
    for ds in datasets:
        for sweep in sweeps:
            eps_values, w_values = pldp.SWEEPS[sweep]
            for e in eps_values:
                for w in w_values:
                    for m in ("lpd", "lpa", *pldp_claims.FIGURE, *pldp_claims.ABLATIONS):
                        for seed, f in ((0, 0.99), (1, 1.01)):
                            out.append(
                                {
                                    "dataset": ds,
                                    "sweep": sweep,
                                    "eps": e,
                                    "w": w,
                                    "mechanism": m,
                                    "seed": seed,
                                    "amse": f * amse(m, e, w),
                                }
                            )
    return out


SCALE = {
    "lpd": 3.0,
    "lpd-proj": 2.0,
    "lpa": 1.5,
    "lpa-proj": 1.0,
    "plpd": 0.9,
    "plpa": 0.7,
    "plpd+": 0.6,
    "plpa+": 0.5,
    "plbd-rp": 0.8,
    "plba-rp": 0.75,
    "plbd-ops": 0.65,
    "plba-ops": 0.55,
}


def _paper_like(m, e, w):
    return SCALE[m] * w / (100 * e)  # falls with eps, rises with w


def test_claims_agree_on_means_shaped_like_the_paper():
    cs = pldp_claims.claims(_rows(_paper_like))
    assert all(c.verdict == Verdict.AGREE for c in cs), [c for c in cs if c.verdict != "agree"]
    h1 = next(c for c in cs if c.ref == "H1")
    assert h1.measured.startswith("50.0% mean R (50.0% pooled), below at 5/5; lowest at 5/5")
    assert [c.ref for c in cs] == ["H1", "H3", "H5", "H6", "H7", "H8", "H9", "H9", "H9"]


def test_h9_judges_each_ops_claim_on_its_own_rows():
    """Issue 35 §3: OPS helping PLBD and OPS helping PLBA are two claims, never pooled."""

    def half(m, e, w):  # PLBA-OPS above PLPA everywhere; PLBD-OPS below PLPD everywhere
        return _paper_like(m, e, w) * (1.5 if m == "plba-ops" else 1.0)

    ops = [c for c in pldp_claims.claims(_rows(half)) if "OPS helps" in c.claim]
    assert [(c.claim, c.verdict) for c in ops] == [
        ("ablation: OPS helps (PLBD-OPS <= PLPD) at most points", Verdict.AGREE),
        ("ablation: OPS helps (PLBA-OPS <= PLPA) at most points", Verdict.DISAGREE),
    ]  # pooled they would read 10/20, a single disagree hiding PLBD's agreement


def test_claims_mark_a_smaller_gap_partly_and_a_reversed_one_disagree():
    def smaller(m, e, w):  # PLPA+ 20% below LBA: sign holds, 27.7 points short of 47.7%
        return _paper_like(m, e, w) * (1.6 if m == "plpa+" else 1.0)

    def reversed_(m, e, w):  # PLPA+ above LBA, and absorption above distribution
        scale = {"plpa+": 2.5, "lpa-proj": 2.2}.get(m, SCALE[m])
        return scale * w / (100 * e)

    h1 = next(c for c in pldp_claims.claims(_rows(smaller)) if c.ref == "H1")
    assert h1.verdict == Verdict.PARTLY and h1.measured.startswith("20.0% mean R")
    cs = pldp_claims.claims(_rows(reversed_))
    assert next(c for c in cs if c.ref == "H1").verdict == Verdict.DISAGREE
    h6 = next(c for c in cs if c.ref == "H6")
    assert "LPA-PROJ < LPD-PROJ 0/10" in h6.measured and h6.verdict == Verdict.DISAGREE


def test_h7_forgives_a_wrong_way_step_within_seed_noise_only():
    def bump(m, e, w):  # PLPA rises from eps 1.0 to 1.5 by 0.5% (seed spread is +-1%)
        return _paper_like(m, e, w) * (1.5 * 1.005 if (m, e) == ("plpa", 1.5) else 1.0)

    h7 = next(c for c in pldp_claims.claims(_rows(bump)) if c.ref == "H7")
    assert h7.measured.startswith("19/20 curves strictly; 20/20 within")
    h7 = next(
        c
        for c in pldp_claims.claims(
            _rows(lambda m, e, w: _paper_like(m, e, w) * (3.0 if (m, e) == ("plpa", 1.5) else 1.0))
        )
        if c.ref == "H7"
    )
    assert "19/20 within" in h7.measured and "PLPA/tdrive/eps" in h7.measured


def test_gap_table_quotes_the_papers_figures():
    means = pldp_claims.means(_rows(_paper_like, ("tdrive", "sin")))
    text = "\n".join(pldp_claims.gap_table(means))
    for paper in ("47.7%", "38.65%", "43.18%", "47.27%", "36.5%", "41.88%"):
        assert paper in text
    assert "| H2 | synthetic (sin) | eps | PLPA | 47.27% | 30.0% | 30.0% | 5/5 | 53.3% |" in text


def test_plots_one_png_per_dataset_sweep_and_panel(tmp_path):
    rows = _rows(_paper_like, ("sin",), ("w",))
    for r in rows:
        r.update(users=100, slots=10)
    paths = plot_all(rows, tmp_path)
    assert sorted(p.name for p in paths) == ["pldp-sin-w-ablation.png", "pldp-sin-w-main.png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_rows_carry_ajsd_of_the_projected_release():
    """Issue 25 item 3 (Figs. 12-13): AJSD per row, on the simplex-projected release; a raw
    baseline row and its projection share it."""
    import math

    from app.bench.pldp import runs as bench_pldp

    values = bench_pldp.load_values("sin", 0, {"users": 300, "slots": 60})
    rows = bench_pldp.point("sin", ["lpa", "plpa"], 1.5, 40, 0, values=values)
    by = {r["mechanism"]: r for r in rows}
    assert set(by) == {"lpa", "lpa-proj", "plpa"}
    assert all(0.0 <= r["ajsd"] <= math.log(2) for r in rows)
    assert by["lpa"]["ajsd"] == by["lpa-proj"]["ajsd"]
