"""Presets resolve and reduce; one quick preset end to end; RESULTS.md verdicts on stub rows."""

from __future__ import annotations

import csv
from dataclasses import replace

import pytest

from app.bench.engine import presets, runs
from app.bench.engine.presets import PRESETS, resolve
from app.bench.engine.runner import run_preset
from app.bench.ldp_ids.paper import TABLE2
from app.bench.report.claims import claims
from app.bench.report.regenerate import regenerate
from app.bench.report.render import ratio_table, render
from tests.bench.stubs import write_cost_slopes


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_resolves_on_each_dataset(name):
    full = PRESETS[name]
    for dataset in full.datasets:
        p = resolve(name, dataset=dataset)
        q = resolve(name, dataset=dataset, quick=True)
        assert p.dataset == q.dataset == dataset and not p.quick and q.quick
        assert len(p.seeds) >= 2 and q.seeds == (0,)
        assert len(q.points()) <= len(p.points())
        # one axis sweeps, the other is fixed (the papers' sweeps), except the CFPU table
        if p.sweep == "eps":
            assert len(p.w_values) == 1 and len(p.eps_values) >= 4
        elif p.sweep == "w":
            assert len(p.eps_values) == 1 and len(p.w_values) >= 4
        for key in ("N", "T", "users", "slots"):  # quick never grows the data
            if key in q.dataset_options and key in p.dataset_options:
                assert q.dataset_options[key] < p.dataset_options[key]
        assert set(q.mechanisms) == set(p.mechanisms)


def test_quick_sizes_and_errors():
    q = resolve("ldp-ids-eps", dataset="sin", quick=True)
    assert q.dataset_options == {"users": 20_000, "slots": 200}
    assert resolve("pwsm-eps").dataset == "tdrive"
    with pytest.raises(ValueError, match="preset must be one of"):
        resolve("pwsm-nope")
    with pytest.raises(ValueError, match="runs on one of"):
        resolve("ldp-ids-cfpu", dataset="lns")


@pytest.mark.parametrize(
    ("name", "options", "mechanisms", "pngs"),
    [
        ("pwsm-eps", {"N": 300, "T": 150}, ("bd", "pbd"), {"amre_vs_eps.png"}),
        (
            "ldp-ids-w",
            {"users": 2_000, "slots": 40},
            ("lbu", "lpu"),
            {"mre_vs_w.png", "cfpu_vs_w.png"},
        ),
        ("ldp-ids-cfpu", {"users": 2_000, "slots": 60}, ("lbu", "lpu"), {"cfpu.png"}),
    ],
)
def test_quick_preset_end_to_end(tmp_path, name, options, mechanisms, pngs):
    quick = resolve(name, dataset="sin", quick=True)
    tiny = replace(quick, mechanisms=mechanisms, options={"sin": options})
    rows, paths = run_preset(tiny, tmp_path, jobs=1, progress=False)
    assert len(rows) == len(tiny.points()) * len(mechanisms)
    assert {p.name for p in paths} == {"results.csv", "results.md"} | pngs
    assert all(p.stat().st_size > 0 for p in paths)
    with (tmp_path / "results.csv").open() as fh:
        got = list(csv.DictReader(fh))
    assert len(got) == len(rows) and {r["seed"] for r in got} == {"0"}
    text = (tmp_path / "results.md").read_text()
    assert name in text and "seeds [0]" in text and mechanisms[0] in text


def _rows(dataset, sweep, values, seeds=(0, 1)):
    """Stub rows: ``values[mechanism]`` is the measure at every point, scaled per point."""
    points = [(e, 120) for e in (0.2, 0.6, 1.0)] if sweep == "eps" else [(0.6, 40), (0.6, 200)]
    rows = []
    for k, (e, w) in enumerate(points):
        for m, v in values.items():
            scale = (3 - k) if sweep == "eps" else (1 + k)  # falls in eps, rises in w
            for s in seeds:
                rows.append(
                    {
                        "dataset": dataset,
                        "mechanism": m,
                        "eps": e,
                        "w": w,
                        "seed": s,
                        "amre": v * scale,
                        "mre": v * scale,
                        "cfpu": v,
                    }
                )
    return rows


def _done(rows_by_run):
    return {(n, ds): (resolve(n, dataset=ds), rows, 1.0) for (n, ds), rows in rows_by_run.items()}


def test_claims_verdicts_on_stub_rows():
    done = _done(
        {
            ("pwsm-eps", "tdrive"): _rows(
                "tdrive", "eps", {"bd": 1000.0, "pbd": 300.0, "ba": 900.0, "pba": 950.0}
            ),
            ("pwsm-w", "tdrive"): _rows(
                "tdrive", "w", {"bd": 1000.0, "pbd": 1100.0, "ba": 900.0, "pba": 950.0}
            ),
            ("pwsm-eps", "sin"): _rows(
                "sin", "eps", {"bd": 1000.0, "pbd": 500.0, "ba": 400.0, "pba": 100.0}
            ),
        }
    )
    by_claim = {(c.ref, c.claim.split(":")[0]): c for c in claims(done)}
    taxi_eps = by_claim[("1", "tdrive Fig. 10 (eps sweep, w=120)")]
    assert taxi_eps.verdict == "agree" and "-70.0% AMRE" in taxi_eps.measured
    taxi_w = by_claim[("2", "tdrive Fig. 11 (w sweep, eps=0.6)")]
    assert taxi_w.verdict == "disagree" and "0/2 points" in taxi_w.measured
    sin = by_claim[("4", "sin Fig. 10 (eps sweep, w=120)")]
    assert sin.verdict == "partly" and "-75.0%" in sin.measured and sin.why  # 75% vs 27.7%
    pbd_everywhere = next(c for c in claims(done) if c.claim.startswith("PBD beats BD"))
    assert pbd_everywhere.verdict == "disagree" and "6/8 points" in pbd_everywhere.measured
    assert next(c for c in claims(done) if c.ref == "7").verdict == "agree"


def test_ldp_claims_and_render(tmp_path):
    mre = {"lbu": 1.0, "lbd": 0.9, "lba": 0.8, "lsp": 0.05, "lpu": 0.3, "lpd": 0.2, "lpa": 0.1}
    cfpu_rows = [
        {"dataset": "sin", "mechanism": m, "eps": e, "w": w, "seed": 0, "mre": 0.1, "cfpu": v}
        for (e, w), paper in TABLE2.items()
        for m, v in {
            "lbu": 1.0,
            "lsp": 1 / w,
            "lpu": 1 / w,
            **{k: x[0] for k, x in paper.items()},
        }.items()
    ]
    wrows = [{**r, "eps": 1.0, "w": r["w"] // 6} for r in _rows("sin", "w", mre)]  # w 6 and 33
    wrows += [{**r, "eps": 1.0, "w": 20} for r in _rows("sin", "w", mre) if r["w"] == 40]
    done = _done({("ldp-ids-w", "sin"): wrows, ("ldp-ids-cfpu", "sin"): cfpu_rows})
    items = claims(done)
    ordering = next(c for c in items if c.claim.startswith("sin, eps = 1, w = 20"))
    assert ordering.verdict == "agree" and ordering.measured.startswith("LSP 0.05 < LPA 0.1")
    table2 = [c for c in items if c.ref == "H12"]
    assert [c.verdict for c in table2] == ["agree", "agree"]
    assert "exact 3/3" in table2[0].measured
    text = render(
        done,
        items,
        figures=tmp_path / "fig",
        link_root=tmp_path,
        cost_lines=["cost here"],
        command="cmd",
        total_s=60.0,
    )
    assert "| H12 |" in text and "**agree**" in text and "cost here" in text
    assert "not run" in text  # PWSM claims 6 and 8 are always listed


def test_regenerate_writes_report_with_stub_runs(tmp_path):
    cost = tmp_path / "cost"
    cost.mkdir()
    host = {"seed": 0, "cpus": 2, "load1": 1.0, "platform": "x", "python": "3", "numpy": "2"}
    write_cost_slopes(cost, **host)
    rows = _rows("sin", "eps", {"bd": 1000.0, "pbd": 500.0, "ba": 400.0, "pba": 100.0})

    def runner(out_root, **_):
        return _done({("pwsm-eps", "sin"): rows})

    path = regenerate(
        tmp_path / "R.md",
        tmp_path / "runs",
        "docs/results",
        cost,
        runner=runner,
        stored=lambda root, **_: {},  # no stored runs of the other papers: "not run"
        checks=dict,
    )
    text = path.read_text()
    assert "| bd | 0.5 / 0.6 | 0.5 / 0.6 | 0.5 / 0.6 | yes |" in text
    assert "sin Fig. 10" in text and presets.PRESETS["pwsm-eps"].figure in text


def test_ratio_presets_and_plbu_in_the_pwsm_sweeps():
    for name, setting in (("pwsm-ratio-eps", "two-eps"), ("pwsm-ratio-w", "two-w")):
        p, q = resolve(name, dataset="sin"), resolve(name, dataset="sin", quick=True)
        assert (p.sweep, p.setting, p.eps_values, p.w_values) == ("ratio", setting, (0.6,), (120,))
        assert p.ratios == (0.1, 0.3, 0.5, 0.7, 0.9) and q.ratios == (0.1, 0.5, 0.9)
        assert p.mechanisms == ("bd", "ba", "pbd", "pba") and "o [0.1, 0.5, 0.9]" in q.describe()
    assert all("plbu" in PRESETS[n].mechanisms for n in ("pwsm-eps", "pwsm-w"))


def test_ratio_axis_end_to_end(tmp_path):
    quick = resolve("pwsm-ratio-eps", dataset="sin", quick=True)
    tiny = replace(
        quick, mechanisms=("bd", "pbd"), ratios=(0.1, 0.9), options={"sin": {"N": 300, "T": 150}}
    )
    rows, paths = run_preset(tiny, tmp_path, jobs=1, progress=False)
    assert [(r["ratio"], r["mechanism"]) for r in rows] == [
        (0.1, "bd"),
        (0.1, "pbd"),
        (0.9, "bd"),
        (0.9, "pbd"),
    ]
    assert rows[0]["amre"] == rows[2]["amre"]  # BD runs at (0.6, 120) whatever o
    assert {r["groups"] for r in rows} == {"120:1.0;120:0.6"}
    assert {p.name for p in paths} == {"results.csv", "results.md", "amre_vs_ratio.png"}
    text = (tmp_path / "results.md").read_text()
    assert "| o | eps | w | bd | pbd |" in text and "| 0.9 | 0.6 | 120 |" in text
    means = presets.sweep_means(rows, "amre", ("ratio",))
    assert set(means) == {(o, m) for o in (0.1, 0.9) for m in ("bd", "pbd")}


def test_plbu_runs_on_the_types_groups_and_releases_counts():
    from app.bench.engine.grid import Grid, Task, run_grid, run_local_task, type_counts_for
    from app.dp.types import Group

    grid = Grid("sin", ("pbd", "plbu"), (0.6,), (120,), (0,), dataset_options={"N": 200, "T": 40})
    rows = run_grid(grid, jobs=1, progress=False)
    pbd, plbu = rows
    assert plbu["groups"] == pbd["groups"] and plbu["fresh"] == 1.0
    assert plbu["amre"] > pbd["amre"] > 0
    # an almost noiseless GRR (eps_g / w_g = 50) returns the true counts: frequencies x N
    exact = Task("plbu", 50.0, 1, 0, (Group(1, 50.0),), (0,) * 10)
    counts, _ = type_counts_for(grid, 0)
    row = run_local_task(exact, "sin", {"N": 200, "T": 40, "seed": 0}, counts, 1.0)
    assert row["amre"] < 1e-9


def _ratio_rows(dataset, curve, seeds=(0, 1)):
    """Stub ratio rows: ``curve[o]`` is PBD's and PBA's AMRE at o, BD/BA flat."""
    return [
        {
            "dataset": dataset,
            "mechanism": m,
            "eps": 0.6,
            "w": 120,
            "ratio": o,
            "seed": s,
            "amre": v if m in ("pbd", "pba") else 5000.0,
        }
        for o, v in curve.items()
        for m in ("bd", "ba", "pbd", "pba")
        for s in seeds
    ]


def test_claims_6_and_8_on_stub_rows():
    central = {"bd": 1000.0, "pbd": 300.0, "ba": 900.0, "pba": 950.0}
    done = _done(
        {
            ("pwsm-eps", "sin"): _rows("sin", "eps", {**central, "plbu": 1e8}),
            ("pwsm-eps", "tlns"): _rows("tlns", "eps", {**central, "plbu": 1e8}),
            ("pwsm-ratio-eps", "sin"): _ratio_rows(
                "sin", {0.1: 1000.0, 0.3: 1050.0, 0.5: 990.0, 0.7: 1000.0, 0.9: 300.0}
            ),
            ("pwsm-ratio-w", "sin"): _ratio_rows(
                "sin", {0.1: 1000.0, 0.3: 800.0, 0.5: 600.0, 0.7: 400.0, 0.9: 350.0}
            ),
        }
    )
    items = claims(done, populations={"sin": 10_000})
    six = next(c for c in items if c.ref == "6")
    assert six.verdict == "partly" and "sin 3/3, tlns 3/3" in six.measured  # worst on TLNS too
    budget, window = [c for c in items if c.ref == "8"]
    assert budget.verdict == "agree" and "2/2 curves" in budget.measured
    assert window.verdict == "disagree" and "o* = 0.920, above 0.9" in window.why
    assert "o* = 0.887, inside the sweep" in budget.why
    table = ratio_table(done)
    assert table[0].startswith("| run | mechanism | o = 0.1 |") and len(table) == 2 + 4


def test_reuse_runs_only_the_missing_mechanisms(tmp_path, monkeypatch):
    tiny = replace(
        resolve("pwsm-eps", dataset="sin", quick=True), mechanisms=("bd", "plbu"), eps_values=(0.6,)
    )
    old = [r for r in _rows("sin", "eps", {"bd": 10.0}) if r["eps"] == 0.6]
    folder = tmp_path / "pwsm-eps-sin"
    presets.write_tables(old, folder, tiny, 1.0)
    asked = []

    def runner(preset, jobs=None, progress=True):
        asked.append(preset.mechanisms)
        return [{**r, "mechanism": "plbu", "amre": 99.0} for r in old]

    monkeypatch.setattr(runs, "resolve", lambda *a, **k: tiny)
    monkeypatch.setattr(runs, "run_rows", runner)
    done = runs.run_all(tmp_path, reuse=True, runs=[("pwsm-eps", "sin")], progress=False)
    _, rows, _ = done[("pwsm-eps", "sin")]
    assert asked == [("plbu",)] and {r["mechanism"] for r in rows} == {"bd", "plbu"}
    assert "plbu" in (folder / "results.md").read_text()
