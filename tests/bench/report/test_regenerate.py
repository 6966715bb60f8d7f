"""The whole command on stub runs: figures copied, the recorded machine named once."""

from __future__ import annotations

import csv
import json

from app.bench.presets import resolve
from app.bench.report import runs
from app.bench.report.regenerate import regenerate

MACHINE = {"platform": "Linux-recorded", "cpus": "2", "python": "3.11.9", "numpy": "2.1.0"}


AMRE = {"bd": 1000.0, "pbd": 500.0, "ba": 400.0, "pba": 100.0}


def _rows():
    return [
        {"dataset": "sin", "mechanism": m, "eps": e, "w": 120, "seed": 0, "amre": v * k}
        for k, e in ((3, 0.2), (2, 0.6), (1, 1.0))
        for m, v in AMRE.items()
    ]


def test_regenerate_copies_figures_and_names_the_recorded_machine(tmp_path):
    cost, out = tmp_path / "cost", tmp_path / "runs"
    cost.mkdir()
    with (cost / "cost_slopes.csv").open("w", newline="") as fh:
        w = csv.DictWriter(
            fh, ["mechanism", "axis", "slope", "slope_top", "holds", "seed", "load1", *MACHINE]
        )
        w.writeheader()
        for axis in ("d", "m", "N"):
            w.writerow(
                {
                    "mechanism": "bd",
                    "axis": axis,
                    "slope": 0.5,
                    "slope_top": 0.6,
                    "holds": True,
                    "seed": 0,
                    "load1": 0.3,
                    **MACHINE,
                }
            )
    (cost / "cost_d.png").write_bytes(b"png")
    (out / "pwsm-eps-sin").mkdir(parents=True)
    (out / "pwsm-eps-sin" / "amre_vs_eps.png").write_bytes(b"png")
    (out / runs.MACHINE_FILE).write_text(json.dumps(MACHINE))

    def runner(out_root, **_):
        return {("pwsm-eps", "sin"): (resolve("pwsm-eps", dataset="sin"), _rows(), 30.0)}

    path = regenerate(tmp_path / "R.md", out, "figs", cost, reuse=True, runner=runner)
    text = path.read_text()
    assert (tmp_path / "figs" / "pwsm-eps-sin" / "amre_vs_eps.png").exists()
    assert "![step time vs d](figs/cost/cost_d.png)" in text
    assert "[amre_vs_eps](figs/pwsm-eps-sin/amre_vs_eps.png)" in text
    assert text.count("Linux-recorded") == 1 and "the machine above, load 0.3" in text
    assert "wall time 0.5 min)" in text and "shared" not in text


def test_regenerate_keeps_the_hand_written_sections_of_the_old_file(tmp_path):
    cost, out = tmp_path / "cost", tmp_path / "runs"
    cost.mkdir()
    (out / "pwsm-eps-sin").mkdir(parents=True)
    report = tmp_path / "R.md"
    pwsm = "## PWSM (Du et al., PVLDB 2025; spec seed-000 §6.6)"
    report.write_text(f"# old\n\n{pwsm}\nstale\n\n## (w,n)-DP\nby hand: T5 agree\n")

    def runner(out_root, **_):
        return {("pwsm-eps", "sin"): (resolve("pwsm-eps", dataset="sin"), _rows(), 30.0)}

    text = regenerate(report, out, "figs", cost, reuse=True, quick=True, runner=runner).read_text()
    assert "## (w,n)-DP\nby hand: T5 agree\n" in text
    assert "# old" not in text and "stale" not in text and text.count(pwsm) == 1
