"""OptStream claims H1-H9 (spec seed-001 §5.8) on hand-made rows: no benchmark runs."""

from __future__ import annotations

from app.bench.engine.claims import Verdict
from app.bench.optstream import claims as o

NP = "OptStream_LS (paper Δ, float Laplace, not private)"


def _rows(errors, eps=(1.0, 0.1, 0.01), alpha=None, month="m", jitter=0.0):
    """Two trials per (mechanism, eps); ``errors[mech]`` the mean error at every eps, scaled
    by 1/eps (trial 1 is ``jitter`` higher, trial 0 as much lower)."""
    return [
        {
            "dataset": "d",
            "month": month,
            "region": "r",
            "mechanism": m,
            "eps": e,
            "alpha": alpha,
            "seed": s,
            "error": (v + (jitter if s else -jitter)) / e,
        }
        for m, v in errors.items()
        for e in eps
        for s in (0, 1)
    ]


def test_h1_agrees_when_ls_is_ten_times_lower_and_disagrees_reversed():
    good = o.stats(_rows({"Laplace": 100.0, "DFT": 50.0, "OptStream_LS": 4.0, "OptStream_ES": 9.0}))
    h1 = o.h1(good)
    assert h1.verdict == Verdict.AGREE and "by >= 1 log10 at 3/3" in h1.measured
    rev = o.stats(_rows({"Laplace": 100.0, "DFT": 50.0, "OptStream_LS": 60.0, NP: 1.0}))
    h1 = o.h1(rev)
    assert h1.verdict == Verdict.DISAGREE and "DFT is below LS at 3/3" in h1.why
    assert "not private) LS would be below both at 3/3" in h1.measured  # shown, never judged


def test_h2_a_tie_counts_for_ls_and_a_reversal_against():
    tie = o.stats(_rows({"OptStream_LS": 5.0, "OptStream_ES": 5.0}))
    assert o.h2(tie).verdict == Verdict.AGREE
    worse = o.stats(_rows({"OptStream_LS": 6.0, "OptStream_ES": 5.0}))
    assert o.h2(worse).verdict == Verdict.DISAGREE and "sampler" in o.h2(worse).why


def test_h3_needs_a_strict_order():
    strict = dict(zip(o.ABLATION_ORDER, (4.0, 3.0, 2.0, 1.0), strict=True))
    assert o.h3(o.stats(_rows(strict))).verdict == Verdict.AGREE
    tie = dict(zip(o.ABLATION_ORDER, (4.0, 3.0, 3.0, 1.0), strict=True))
    h3 = o.h3(o.stats(_rows(tie)))
    assert h3.verdict == Verdict.DISAGREE and "0/3 rows" in h3.measured
    assert o.h3(o.stats(_rows(tie))).why == ""  # post-processing lowers <P,o,O> here
    hurts = dict(zip(o.ABLATION_ORDER, (3.0, 6.0, 2.0, 1.0), strict=True))
    why = o.h3(o.stats(_rows(hurts))).why
    assert "raises the error in 3/3 rows, by +0.30 to +0.30 log10" in why
    assert "log10 2 = +0.30" in why


def test_aligned_and_parallel_columns_are_never_judged():
    for label in (
        "OptStream_LS (aligned periods, not w-event private)",
        "OptStream_h per-region (parallel regions, not private if a user moves)",
        NP,
    ):
        assert not o.is_private(label)
    peg = {"PeGaSus": 5.0, "OptStream_ES": 6.0, "OptStream_LS": 6.0}
    aligned = {**peg, "OptStream_LS (aligned periods, not w-event private)": 1.0}
    h7 = o.h7(o.stats(_rows(aligned)))
    assert h7.verdict == Verdict.DISAGREE and "above OptStream in 0/6" in h7.measured
    assert "PeGaSus would be above OptStream in 3/3" in h7.why


def test_h4_counts_the_best_private_hierarchical_variant():
    errors = {
        "OptStream_h": 9.0,
        "OptStream_h per-region": 1.0,
        "DFT": 2.0,
        "OptStream_h" + NP[12:]: 0.1,
    }
    h4 = o.h4(o.stats(_rows(errors, eps=(1.0,))))
    assert h4.verdict == Verdict.AGREE and "OptStream_h per-region lowest at 1/1" in h4.measured
    assert "(not private) OptStream_h would be the lowest at 1/1" in h4.why  # shown, not judged
    del errors["OptStream_h per-region"]
    assert o.h4(o.stats(_rows(errors, eps=(1.0,)))).verdict == Verdict.DISAGREE


def test_h5_a_lead_within_two_standard_errors_is_partly():
    def rows(es):
        return [
            {"series": x, "seed": s, "error": v + (2 * s - 1) * 3.0}
            for x, v in (("Real", 600.0), ("Laplace", 620.0), ("OptStream_ES", es))
            for s in (0, 1)
        ]

    assert o.h5(o.forecast_stats(rows(600.0))).verdict == Verdict.AGREE
    assert o.h5(o.forecast_stats(rows(619.0))).verdict == Verdict.PARTLY
    assert o.h5(o.forecast_stats(rows(650.0))).verdict == Verdict.DISAGREE


def test_h6_growth_with_alpha_and_optstream_lowest():
    rows = []
    for alpha, scale in ((10.0, 1.0), (50.0, 2.0), (100.0, 2.0)):  # DFT stays from 50 to 100
        rows += _rows({"DFT": 5.0 * scale, "OptStream_ES": 4.0 * alpha / 10}, (1.0,), alpha)
    grows, lowest = o.h6(o.stats(rows))
    assert grows.verdict == Verdict.DISAGREE and "1/2 curves" in grows.measured
    assert lowest.verdict == Verdict.DISAGREE and "lowest at 1/3 points" in lowest.measured


def test_h7_counts_pegasus_above_both_variants():
    s = o.stats(_rows({"PeGaSus": 5.0, "OptStream_ES": 4.0, "OptStream_LS": 6.0}))
    h7 = o.h7(s)
    assert h7.verdict == Verdict.DISAGREE and "3/6 comparisons" in h7.measured


def test_h8_is_the_tests_outcome():
    assert [o.h8(x).verdict for x in (True, False, None)] == [
        Verdict.AGREE,
        Verdict.DISAGREE,
        Verdict.NOT_RUN,
    ]


def test_h9_best_k_near_k_star_and_below_laplace():
    def rows(best):
        return [
            {
                "L": lip,
                "k": k,
                "eps": 1.0,
                "error": 1.0 if k == best[lip] else (50.0 if k == 48 else 5.0),
            }
            for lip in best
            for k in (2, 3, 6, 24, 48)
        ]

    assert o.h9(rows({0.1: 2, 1.0: 6, 10.0: 24})).verdict == Verdict.AGREE
    # the module's scale (issue 35 §3): near k* at 2/3 L values is partly, at 1/3 disagree
    assert o.h9(rows({0.1: 2, 1.0: 6, 10.0: 3})).verdict == Verdict.PARTLY
    assert o.h9(rows({0.1: 2, 1.0: 2, 10.0: 3})).verdict == Verdict.DISAGREE
    above = [{**r, "error": 0.5} if r["k"] == 48 else r for r in rows({0.1: 2})]
    assert o.h9(above).verdict == Verdict.DISAGREE


def test_each_twin_is_named_by_its_own_setting():
    """Aligned periods and the paper's calibration are different settings: a reason names the
    twin it counts (an aligned column is never called the paper's calibration)."""
    aligned = "OptStream_LS (aligned periods, not w-event private)"
    base = {"Laplace": 100.0, "DFT": 50.0, "OptStream_LS": 60.0, "OptStream_ES": 70.0}
    h1 = o.h1(o.stats(_rows({**base, aligned: 40.0})))
    assert "with aligned periods (not private) LS would be below both at 3/3" in h1.measured
    assert "paper's calibration" not in h1.measured
    h1 = o.h1(o.stats(_rows({**base, aligned: 40.0, NP: 80.0})))
    assert "with the paper's calibration (not private) LS would be below both at 0/3" in h1.measured
    why = o.h6(o.stats(_rows({**base, aligned: 40.0}, alpha=10.0)))[1].why
    assert why == "with aligned periods (not private) OptStream_LS would be the lowest at 3/3"
