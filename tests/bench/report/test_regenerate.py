"""The whole command on stub runs: figures copied, the recorded machine named once."""

from __future__ import annotations

import csv

from app.bench.engine.presets import resolve
from app.bench.engine.store import find, write_records
from app.bench.report.regenerate import regenerate
from app.bench.report.stored import STORED, ensure
from tests.bench.stubs import write_cost_slopes

MACHINE = {"platform": "Linux-recorded", "cpus": "2", "python": "3.11.9", "numpy": "2.1.0"}


AMRE = {"bd": 1000.0, "pbd": 500.0, "ba": 400.0, "pba": 100.0}


def _rows():
    return [
        {"dataset": "sin", "mechanism": m, "eps": e, "w": 120, "seed": 0, "amre": v * k}
        for k, e in ((3, 0.2), (2, 0.6), (1, 1.0))
        for m, v in AMRE.items()
    ]


def _none(root, **_):
    """No stored run of the other papers: their sections say "not run"."""
    return {}


def _cost(tmp_path):
    """A finished cost run (its slopes), so that the report runs no cost benchmark."""
    cost = tmp_path / "cost"
    cost.mkdir()
    return write_cost_slopes(cost, seed=0, load1=0.3, **MACHINE)


def test_regenerate_copies_figures_and_names_the_recorded_machine(tmp_path):
    cost, out = _cost(tmp_path), tmp_path / "runs"
    (cost / "cost_d.png").write_bytes(b"png")
    (out / "pwsm-eps-sin").mkdir(parents=True)
    (out / "pwsm-eps-sin" / "amre_vs_eps.png").write_bytes(b"png")
    write_records(out, {"pwsm-eps-sin": {"machine": MACHINE}})

    def runner(out_root, **_):
        return {("pwsm-eps", "sin"): (resolve("pwsm-eps", dataset="sin"), _rows(), 30.0)}

    path = regenerate(
        tmp_path / "R.md", out, "figs", cost, reuse=True, runner=runner, stored=_none, checks=dict
    )
    text = path.read_text()
    assert (tmp_path / "figs" / "pwsm-eps-sin" / "amre_vs_eps.png").exists()
    assert "![step time vs d](figs/cost/cost_d.png)" in text
    assert "[amre_vs_eps](figs/pwsm-eps-sin/amre_vs_eps.png)" in text
    assert text.count("Linux-recorded") == 1 and "the machine above, load 0.3" in text
    assert "wall time 0.5 min)" in text and "shared" not in text


PAPER_RANK = {
    "lpd": 9.0,
    "lpa": 8.0,
    "lpd-proj": 7.0,
    "lpa-proj": 6.0,
    "plbd-rp": 5.5,
    "plba-rp": 5.0,
    "plpd": 4.0,
    "plbd-ops": 3.9,
    "plpd+": 3.5,
    "plba-ops": 3.0,
    "plpa": 2.0,
    "plpa+": 1.0,
}


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _stored_fixture(root):
    """Tiny outputs of every stored run (two points a sweep, two seeds): what
    ``dpstream bench pldp | wn | optstream`` and the report's own steps write."""
    _write(
        root / "pldp-results.csv",
        [
            {"sweep": sweep, "dataset": ds, "mechanism": m, "eps": e, "w": w, "users": 600,
             "slots": 40, "d": 5, "seed": seed, "step": 40, "levels": 1,
             "amse": v * (1 + seed) / e * w / 40, "publications": 3, "run_s": 0.1, "ajsd": v}
            for sweep, points in (("eps", ((1.0, 120), (2.0, 120))), ("w", ((1.5, 40), (1.5, 80))))
            for ds in ("tdrive", "sin")
            for e, w in points
            for m, v in PAPER_RANK.items()
            for seed in (0, 1)
        ],
    )  # fmt: skip
    mechs = {"rescuedp": 1.0, "str": 2.0, "stbd": 3.0, "bd": 4.0, "wn_uniform": 5.0}
    _write(
        root / "wn" / "trajectory.csv",
        [
            {"dataset": "msnbc", "figure": fig, "axis": axis, "value": x, "mechanism": m,
             "mae": v * (x if axis == "w" else 1 / x if axis == "eps" else 1), "mre": 0.1,
             "seeds": 2, "eps": 1.0, "w": 120, "n": 6, "l": 20, "slots": 768,
             "seeds_used": "0..1"}
            for fig, axis, xs in (("fig8", "eps", (0.2, 1.0)), ("fig9", "w", (40, 200)),
                                  ("fig10", "n", (4, 9)))
            for x in xs
            for m, v in mechs.items()
            if m != "wn_uniform" or axis == "n"
        ],
    )  # fmt: skip
    _write(
        root / "wn" / "table1.csv",
        [
            {"dataset": "msnbc", "users": 9, "nodes": 17, "edges": 29, "w": w, "n": n, "share": s}
            for w in (40, 120)
            for n, s in [*enumerate((50, 90) + (100,) * 7), ("other", 0)]
        ],
    )

    def period(labels, eps=(1.0, 0.1), alphas=(None,), regions=("Auvergne-Rhône-Alpes",)):
        return [
            {"dataset": "rte2013", "month": "2013-01", "region": region, "mechanism": m,
             "registry": "x", "eps": e, "alpha": "" if a is None else a, "strict": False,
             "seed": seed, "params": "{}", "error": (1 + k + seed) / e * (a or 1)}
            for k, m in enumerate(labels)
            for e in eps
            for a in alphas
            for region in regions
            for seed in (0, 1)
        ]  # fmt: skip

    fig3 = ("OptStream_LS", "OptStream_ES", "DFT", "Laplace", "PeGaSus")
    _write(root / "optstream-fig3" / "optstream.csv", period(fig3))
    _write(
        root / "optstream-fig8" / "optstream.csv",
        period(("<P,S,O>", "<P,S,o>", "<P,o,O>", "<P,o,o>")),
    )
    _write(root / "optstream-fig10" / "optstream.csv", period(fig3[:4], (1.0,), (10.0, 50.0)))
    _write(
        root / "optstream-fig4" / "optstream.csv",
        period(("OptStream_h", "DFT"), (1.0,), (10.0,), ("national", "regional")),
    )
    _write(
        root / "optstream-fig6" / "forecast.csv",
        [
            {"region": "ARA", "eps": 0.1, "series": x, "seed": s, "day": d, "error": v + s}
            for x, v in (("Real", 600.0), ("Laplace", 620.0), ("OptStream_ES", 610.0))
            for s in (0, 1)
            for d in ("2013-02-01", "2013-02-02")
        ],
    )
    _write(
        root / "optstream-thm11" / "thm11.csv",
        [
            {"L": 1.0, "k": k, "eps": 1.0, "w": 48, "trials": 2, "error": e}
            for k, e in ((2, 4.0), (6, 1.0), (48, 40.0))
        ],
    )


def test_reuse_renders_every_papers_section_from_a_tiny_stored_fixture(tmp_path):
    """Issue 25: RESULTS.md is generated whole (no hand-kept sections); --reuse rebuilds it."""
    cost, out, figs = _cost(tmp_path), tmp_path / "runs", tmp_path / "figs"
    (out / "pwsm-eps-sin").mkdir(parents=True)
    _stored_fixture(figs)
    report = tmp_path / "R.md"
    report.write_text("# old\n\n## (w,n)-DP\nby hand: T5 agree\n")

    def runner(out_root, **_):
        return {("pwsm-eps", "sin"): (resolve("pwsm-eps", dataset="sin"), _rows(), 30.0)}

    def no_runs(spec, root, quick):
        raise AssertionError(f"--reuse ran {spec.key}")

    def stored(root, **kw):
        missing = [s for s in STORED if not find(root / s.folder / s.output)]
        return ensure(root, specs=[s for s in STORED if s not in missing], produce=no_runs, **kw)

    text = regenerate(
        report, out, "figs", cost, reuse=True, runner=runner, stored=stored, checks=dict
    ).read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    for paper in ("PWSM", "LDP-IDS", "PLDP-IDS", "(w,n)-DP", "OptStream"):
        assert any(h.startswith(f"## {paper} (") for h in headings), paper
    assert "by hand" not in text and "# old" not in text
    assert "| T4 |" in text and "Uniform (w,n), every timestamp" in text and "| H9 |" in text
    assert "[pldp-results.csv](figs/pldp-results.csv)" in text
    assert "Summary: " in text and "OptStream " in text.split("Summary: ")[1].split("\n")[0]


def test_quick_keeps_the_stored_full_runs_apart(tmp_path):
    """A quick report runs the other papers' verbs into the run folder, never over the
    stored full runs beside the figures."""
    cost, out = _cost(tmp_path), tmp_path / "runs"
    roots = []

    def stored(root, **kw):
        roots.append((root, kw))
        return {}

    def runner(out_root, **_):
        return {("pwsm-eps", "sin"): (resolve("pwsm-eps", dataset="sin"), _rows(), 30.0)}

    regenerate(
        tmp_path / "R.md", out, "figs", cost, quick=True, runner=runner, stored=stored, checks=dict
    )
    assert roots == [(out / "quick-stored", {"reuse": False, "quick": True})]
