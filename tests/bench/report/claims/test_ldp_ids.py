"""LDP-IDS claims (spec seed-004 §7.8), one test per hypothesis function, on hand-made means."""

from __future__ import annotations

from app.bench.engine.claims import Verdict
from app.bench.engine.evidence import Evidence
from app.bench.ldp_ids import claims as ldp_ids
from app.bench.ldp_ids.paper import TABLE2

from ..conftest import sweep

EPS = [(0.5, 20), (1.0, 20), (3.0, 20)]
W = [(1.0, 10), (1.0, 20), (1.0, 50)]
GOOD = {"lbu": 1.0, "lbd": 0.9, "lba": 0.8, "lsp": 0.05, "lpu": 0.3, "lpd": 0.2, "lpa": 0.1}


def _eps(values):
    return sweep(EPS, {m: [3 * v, 2 * v, v] for m, v in values.items()})


def _w(values):
    return sweep(W, {m: [v, 2 * v, 3 * v] for m, v in values.items()})


def _ev(eps=None, w=None, cfpu=None):
    mre = {
        **{("ldp-ids-eps", ds): r for ds, r in (eps or {}).items()},
        **{("ldp-ids-w", ds): r for ds, r in (w or {}).items()},
    }
    return Evidence(mre=mre, cfpu={("ldp-ids-cfpu", ds): r for ds, r in (cfpu or {}).items()})


def test_h1_population_division_below_budget_division():
    (row,) = ldp_ids.h1(_ev(eps={"sin": _eps(GOOD)}))
    assert row.verdict == Verdict.AGREE and "3/3 points (sin); smallest gap x2.7" in row.measured
    assert ldp_ids.h1(_ev()) == []


def test_h2_and_h4_blame_lsp_when_only_lsp_is_not_monotone():
    eps = _eps(GOOD)
    eps[(3.0, 20, "lsp")] = (1.0, 0.0, 1)  # LSP rises at the largest eps
    (h2,) = ldp_ids.h2(_ev(eps={"lns": eps}))
    assert h2.verdict == Verdict.PARTLY and h2.measured == "6/7 curves; not: LSP/lns"
    assert h2.why == ldp_ids.WHY_LSP_CURVES
    (h4,) = ldp_ids.h4(_ev(w={"lns": _w(GOOD)}))
    assert h4.verdict == Verdict.AGREE and h4.ref == "H4"


def test_h3_lba_and_lbd_below_lbu():
    (row,) = ldp_ids.h3(_ev(eps={"sin": _eps(GOOD)}))
    assert row.verdict == Verdict.AGREE and row.measured == "LBA < LBU at 3/3, LBD < LBU at 3/3"


def test_h5_failures_on_taxi_only_name_the_sample():
    taxi = _w(GOOD)
    taxi[(1.0, 10, "lpa")] = (0.25, 0.0, 1)  # LPA above LPD at w = 10
    (row,) = ldp_ids.h5(_ev(w={"sin": _w(GOOD), "tdrive": taxi}))
    assert row.verdict == Verdict.PARTLY and row.measured == "5/6 points; not: tdrive w=10"
    assert row.why == ldp_ids.WHY_TDRIVE
    (row,) = ldp_ids.h5(_ev(w={"sin": taxi}))
    assert row.verdict == Verdict.PARTLY and row.why == ldp_ids.WHY_POPULATION_ORDER


def test_h5_orderings_per_dataset_at_eps_1_w_20():
    (row,) = ldp_ids.h5_orderings(_ev(eps={"sin": _eps(GOOD)}))
    assert row.verdict == Verdict.AGREE
    assert row.measured == "LSP 0.1 < LPA 0.2 < LPD 0.4 < LPU 0.6 < LBU 2"


def test_h6_at_the_largest_w():
    (row,) = ldp_ids.h6(_ev(w={"sin": _w({**GOOD, "lbd": 1.5})}))
    assert row.verdict == Verdict.AGREE and row.measured == "LBD > LBU on sin; LBA <= LBU on 1/1"
    (row,) = ldp_ids.h6(_ev(w={"sin": _w(GOOD)}))
    assert row.verdict == Verdict.PARTLY and "LBD > LBU on none" in row.measured


def test_h7_lsp_lowest_everywhere_is_only_partly():
    (row,) = ldp_ids.h7(_ev(eps={"sin": _eps(GOOD)}, w={"log": _w(GOOD)}))
    assert row.verdict == Verdict.PARTLY and row.measured.endswith("sin #1, log #1")
    assert row.why.startswith("LSP is lowest on every dataset here")


def _table2(col, change=None):
    out = {}
    for (e, w), paper in TABLE2.items():
        vals = {"lbu": 1.0, "lsp": 1 / w, "lpu": 1 / w, **{m: v[col] for m, v in paper.items()}}
        vals.update(change or {})
        out.update({(e, w, m): (v, 0.0, 1) for m, v in vals.items()})
    return out


def test_h12_on_the_papers_own_table_agrees():
    exact, order = ldp_ids.h12(_ev(cfpu={"sin": _table2(0), "tdrive": _table2(2)}))
    assert exact.verdict == order.verdict == Verdict.AGREE
    assert (
        exact.measured == "exact 6/6 cells; within tolerance 6/6" and order.measured == "6/6 cells"
    )


def test_h12_beyond_tolerance_is_partly():
    exact, _ = ldp_ids.h12(_ev(cfpu={"log": _table2(1, {"lbd": 1.4})}))
    assert exact.verdict == Verdict.PARTLY and "within tolerance 0/3" in exact.measured
    assert exact.why == ldp_ids.WHY_CFPU


def test_claims_in_the_report_order():
    ev = _ev(eps={"sin": _eps(GOOD)}, w={"sin": _w(GOOD)}, cfpu={"sin": _table2(0)})
    refs = [c.ref for c in ldp_ids.claims(ev)]
    assert refs == ["H1", "H2", "H4", "H3", "H5", "H5", "H6", "H7", "H12", "H12"]
