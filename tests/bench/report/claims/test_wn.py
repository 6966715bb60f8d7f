"""(w,n)-DP claims T1-T7 (spec seed-003 §5.7) on hand-made rows: no benchmark runs."""

from __future__ import annotations

from app.bench.engine.claims import Verdict
from app.bench.wn import claims as wn

PAPER_ORDER = {"rescuedp": 1.0, "str": 2.0, "stbd": 3.0, "bd": 4.0}


def _rows(figure, values, curve, slots=768, dataset="msnbc"):
    """One row per (value, mechanism): MAE = base[mech] * curve(x)."""
    return [
        {
            "dataset": dataset,
            "figure": figure,
            "value": x,
            "mechanism": m,
            "mae": base * curve(m, x),
            "slots": slots,
        }
        for x in values
        for m, base in PAPER_ORDER.items()
    ]


def _by(claims, ref):
    return next(c for c in claims if c.ref == ref)


def _paper_like():
    return (
        _rows("fig8", (0.2, 0.6, 1.0), lambda m, e: 1 / e)
        + _rows("fig9", (40, 120, 200), lambda m, w: w if m in ("bd", "stbd") else 1.0)
        + _rows("fig10", (4, 6, 9), _n_curve)
    )


def _n_curve(m, n):
    """STBD and STR move a little with n (within 10%), BD and RescueDP take no n."""
    return 1.0 + 0.01 * n if m in ("stbd", "str") else 1.0


def test_paper_like_rows_agree_on_t1_to_t4():
    cs = wn.claims(_paper_like())
    assert [_by(cs, r).verdict for r in ("T1", "T2", "T3", "T4")] == [Verdict.AGREE] * 4
    t4 = _by(cs, "T4")
    assert t4.measured.startswith("3/3 informative checks hold")
    assert "BD and RescueDP take no n" in t4.why and "contrast" not in t4.why


def test_t1_fails_when_the_error_rises_with_eps():
    rows = _rows("fig8", (0.2, 0.6, 1.0), lambda m, e: e)  # reversed direction
    t1 = _by(wn.claims(rows), "T1")
    assert t1.verdict == Verdict.DISAGREE and "not falling: RescueDP, STR, STBD, BD" in t1.measured


def test_t2_a_tie_between_stbd_and_bd_breaks_the_strict_order():
    tie = {**PAPER_ORDER, "stbd": 4.0}
    rows = [{**r, "mae": tie[r["mechanism"]]} for r in _rows("fig8", (0.2, 1.0), lambda m, e: 1)]
    t2 = _by(wn.claims(rows), "T2")
    assert t2.verdict == Verdict.DISAGREE and t2.measured.startswith("full order at 0/2 points")


def test_t3_flat_means_within_ten_percent_and_short_data_is_not_judged():
    def curve(m, w):
        return (
            {40: 0.9, 120: 1.0, 200: 1.11}[w] if m == "str" else (w if m in ("bd", "stbd") else 1)
        )

    rows = _rows("fig9", (40, 120, 200), curve)
    t3 = _by(wn.claims(rows), "T3")
    assert t3.verdict == Verdict.PARTLY and "3/4 checks hold" in t3.measured  # STR +10.5%
    short = _by(wn.claims(_rows("fig9", (40, 200), curve, slots=599)), "T3")
    assert short.verdict == Verdict.NOT_RUN and "msnbc (599 slots)" in short.why


def test_t4_counts_only_informative_checks():
    """Issue 35 §3: a vacuous n sweep (STBD and STR the same at every n) and the Uniform
    contrast (eps / w a slot whatever n) are said, not counted."""
    rows = _rows("fig10", (4, 9), _n_curve, dataset="tdrive")
    rows += _rows("fig10", (4, 9), lambda m, n: 1.0)  # msnbc: nothing moves with n
    rows += [
        {
            "dataset": "msnbc",
            "figure": "fig10",
            "value": n,
            "mechanism": "wn_uniform",
            "mae": 10.0,
            "slots": 768,
        }
        for n in (4, 9)
    ]
    t4 = _by(wn.claims(rows), "T4")
    assert t4.verdict == Verdict.AGREE and t4.measured.startswith("3/3 informative checks hold")
    assert "msnbc" not in t4.measured and "msnbc: STBD and STR release the same" in t4.why
    assert "cannot rise with n: msnbc 10 -> 10" in t4.why
    wide = [
        {**r, "mae": r["mae"] * r["value"]}
        if (r["dataset"], r["mechanism"]) == ("tdrive", "stbd")
        else r
        for r in rows
    ]
    t4 = _by(wn.claims(wide), "T4")
    assert t4.verdict == Verdict.PARTLY and "2/3 informative checks" in t4.measured
    vacuous = _by(wn.claims(_rows("fig10", (4, 9), lambda m, n: 1.0)), "T4")
    assert vacuous.verdict == Verdict.NOT_RUN


def _table1(shares_by_w, nodes=100, edges=342):
    return [
        {
            "dataset": "tdrive",
            "users": 9,
            "nodes": nodes,
            "edges": edges,
            "w": w,
            "n": n,
            "share": s,
        }
        for w, shares in shares_by_w.items()
        for n, s in [*enumerate(shares), ("other", 0.0)]
    ]


def test_t5_judges_the_gap_to_the_paper_not_the_direction():
    """Issue 35 §3: shares that never rise with w hold by construction; only the gap to the
    paper's Table 1 counts."""
    ours = _table1({40: (10, 60, 100, 100, 100, 100, 100, 100, 100), 120: (5, 50) + (100,) * 7})
    t5 = _by(wn.claims([], ours), "T5")
    assert t5.verdict == Verdict.DISAGREE and "within 5 points at 0/1" in t5.measured
    assert "never rise with w on every stand-in (yes), true by construction" in t5.why
    paper = _table1({w: wn.PAPER_TABLE1[w] for w in (40, 120)})
    assert _by(wn.claims([], paper), "T5").verdict == Verdict.AGREE
    assert _by(wn.claims([], []), "T5").verdict == Verdict.NOT_RUN


def test_t6_and_t7():
    assert _by(wn.claims([], _table1({120: (1,) * 9})), "T6").verdict == Verdict.DISAGREE
    close = _table1({120: (1,) * 9}, nodes=9_000, edges=30_000)
    assert _by(wn.claims([], close), "T6").verdict == Verdict.AGREE
    assert _by(wn.claims([], (), True), "T7").verdict == Verdict.AGREE
    assert _by(wn.claims([], (), False), "T7").verdict == Verdict.DISAGREE
    assert _by(wn.claims([]), "T7").verdict == Verdict.NOT_RUN


def test_t2_counts_the_grouped_rescuedp_when_the_run_has_it():
    rows = _rows("fig8", (0.2, 1.0), lambda m, e: 1)
    rows += [{**r, "mechanism": "rescuedp_g", "mae": 0.5} for r in rows if r["mechanism"] == "bd"]
    t2 = _by(wn.claims(rows), "T2")
    assert "RescueDP (dynamic grouping) below RescueDP and STR at 2/2" in t2.measured
