"""The runs' rows sorted into the means each claim reads."""

from __future__ import annotations

from app.bench.engine.evidence import gather
from app.bench.engine.presets import resolve


def _row(mech, **kw):
    return {"dataset": "sin", "mechanism": mech, "eps": 0.6, "w": 120, "seed": 0, **kw}


def test_gather_sorts_runs_by_measure():
    done = {
        ("pwsm-eps", "sin"): (resolve("pwsm-eps", "sin"), [_row("bd", amre=4.0, fresh=0.5)], 1.0),
        ("pwsm-ratio-w", "sin"): (
            resolve("pwsm-ratio-w", "sin"),
            [_row("pbd", amre=2.0, ratio=0.1)],
            1.0,
        ),
        ("ldp-ids-w", "sin"): (resolve("ldp-ids-w", "sin"), [_row("lbu", mre=0.3, cfpu=1.0)], 1.0),
    }
    ev = gather(done, populations={"sin": 10})
    assert ev.amre == {("pwsm-eps", "sin"): {(0.6, 120, "bd"): (4.0, 0.0, 1)}}
    assert ev.fresh[("pwsm-eps", "sin")] == {(0.6, 120, "bd"): (0.5, 0.0, 1)}
    assert ev.ratio == {("pwsm-ratio-w", "sin"): {(0.1, "pbd"): (2.0, 0.0, 1)}}
    assert ev.ratio_fresh == {} and ev.populations == {"sin": 10} and ev.floors == {}
    assert ev.mre == {("ldp-ids-w", "sin"): {(0.6, 120, "lbu"): (0.3, 0.0, 1)}}
    assert ev.cfpu[("ldp-ids-w", "sin")][(0.6, 120, "lbu")][0] == 1.0
