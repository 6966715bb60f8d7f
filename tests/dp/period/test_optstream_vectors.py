"""OptStream: the spec's test vectors and privacy invariants (spec seed-001 §2, §3)."""

from __future__ import annotations

import numpy as np
import pytest

from app.dp.errors import InsufficientBudgetError, ParameterError
from app.dp.period import DFT, HierOptStream, OptStream, PeGaSus
from app.dp.period.postprocess import (
    default_features,
    incidence,
    postprocess,
    stacked_system,
)
from app.dp.period.sampling import equally_spaced, l1_sample, l1_sensitivity, segment_l1
from app.dp.registry import create, get, names
from app.dp.types import Group

DAY = Group(48, 1.0)


class RecordingRNG:
    """A generator that records every Laplace draw as (scale, number of values)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.draws: list[tuple[float, int]] = []

    def laplace(self, loc, scale, size=None):
        self.draws.append((float(scale), int(np.prod(size)) if size is not None else 1))
        return self.rng.laplace(loc, scale, size)


def smooth_day(periods: int, d: int = 1, seed: int = 0) -> np.ndarray:
    """``(48 periods, d)`` half-hourly loads around 5000 MW with a daily shape."""
    rng = np.random.default_rng(seed)
    t = np.arange(48 * periods)[:, None]
    base = rng.uniform(2000, 8000, (1, d))
    return np.rint(base * (1 + 0.3 * np.sin(2 * np.pi * (t - 12) / 48))).astype(np.int64)


def test_es_positions_spec_2_4():
    assert (equally_spaced(48, 10) + 1).tolist() == [1, 6, 11, 17, 22, 27, 32, 38, 43, 48]
    assert equally_spaced(5, 9).tolist() == [0, 1, 2, 3, 4]


def test_example_3_feature_query():
    x = np.array([10, 15, 20, 23, 41, 72, 55, 50, 88, 72, 40, 18])
    # F2 = {{1..4}, {5..9}, {10..12}} (1-based) gives Q_F2 = (68, 306, 130)
    assert (incidence(12, (4, 9)) @ x).tolist() == [68, 306, 130]


def test_paper_features_and_system_size():
    assert default_features(48) == ((14, 24, 36), ())
    a, sw = stacked_system(48, default_features(48))
    assert a.shape == (53, 48)  # spec §6: 53 x 48
    assert sorted(set(np.round(sw**2, 12))) == [round(1 / 48, 12), 0.25, 1.0]


def test_l1_score_sensitivity_thm_6():
    """Moving one slot by at most Delta (in L1 over categories) moves a segment's summed
    score by at most 2 Delta (b - a) (Thm 6 and its histogram form)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        x = rng.uniform(0, 100, (12, 3))
        a, b = sorted(rng.choice(12, 2, replace=False))
        y = x.copy()
        changed = rng.integers(0, 12, 4)
        for t in changed:  # any number of slots move, each by <= 1 in L1
            step = rng.laplace(size=3)
            y[t] += step / np.abs(step).sum()
        assert abs(segment_l1(y, a, b) - segment_l1(x, a, b)) <= 2 * (b - a) + 1e-9


def test_l1_sampler_structure_spec_3_2():
    """rho once at 2 Delta_L / eps_s, every query at 4 k Delta_L / eps_s, |S| = k, first and
    last slot in S."""
    x = smooth_day(1).astype(float)
    for seed in range(20):
        rng = RecordingRNG(seed)
        s = l1_sample(x, 10, 1 / 3, 1000.0, 1.0, rng, noise="laplace")
        sens = l1_sensitivity(1.0, 48, 10)
        assert sens == 2 * 38
        assert rng.draws[0] == (pytest.approx(2 * sens * 3), 1)
        assert all(d == (pytest.approx(4 * 10 * sens * 3), 1) for d in rng.draws[1:])
        assert len(s) == 10 and s[0] == 0 and s[-1] == 47 and (np.diff(s) > 0).all()


def test_budget_audit_per_period_spec_3_1():
    """Every draw of a period, as (sensitivity / scale), adds up to eps_P (Lemma 1)."""
    m = OptStream(d=2, groups=[DAY], strict=False, feature_sensitivity="rigorous", noise="laplace")
    rng = RecordingRNG(3)
    x = smooth_day(1, d=2).astype(float)
    m.noisy_inputs(x, 1.0, rng)
    draws = rng.draws
    eps_s, eps_p, eps_o = m.split(1.0)
    sens_l = l1_sensitivity(1.0, 48, 10)
    assert draws[0][0] == pytest.approx(2 * sens_l / eps_s)  # SVT: eps_s as one unit
    svt = [d for d in draws if d[1] == 1]
    rest = draws[len(svt) :]
    assert rest[0] == (pytest.approx(10 * 1.0 / eps_p), 10 * 2)  # PERTURB, k x d draws
    features = rest[1:]
    assert len(features) == 2  # F2 and F3, both categories
    assert [n for _, n in features] == [4 * 2, 1 * 2]
    spent = eps_s + (10 * 1.0) / rest[0][0] + sum(48 * 1.0 / s for s, _ in features)
    assert spent == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("sampling", "post", "expected"),
    [
        ("ls", True, (1 / 3, 1 / 3, 1 / 3)),
        ("es", True, (0.0, 1 / 2, 1 / 2)),
        ("none", True, (0.0, 1 / 2, 1 / 2)),
        ("none", False, (0.0, 1.0, 0.0)),
        ("ls", False, (1 / 2, 1 / 2, 0.0)),
    ],
)
def test_ablation_splits_spec_b4(sampling, post, expected):
    m = OptStream(d=1, groups=[DAY], sampling=sampling, postprocess=post)
    assert m.split(1.0) == pytest.approx(expected)


def test_es_thirds_wastes_a_third():
    m = OptStream(d=1, groups=[DAY], sampling="es", es_split="thirds")
    assert m.split(1.0) == pytest.approx((0.0, 1 / 3, 1 / 3))


def test_postprocess_never_reads_raw_data_spec_3_5():
    m = OptStream(d=2, groups=[DAY], strict=False)
    x = smooth_day(1, d=2).astype(float)
    rec, answers = m.noisy_inputs(x, 1.0, np.random.default_rng(9))
    before = postprocess(rec, answers, m.active_features)
    x[:] = np.nan  # poisoned after the noisy answers are drawn
    assert np.array_equal(postprocess(rec, answers, m.active_features), before)


def test_no_state_crosses_periods_spec_3_6():
    """A period's release depends on its own data and noise only, not on history."""
    x = smooth_day(3)
    a = OptStream(d=1, groups=[DAY])
    for counts in x[:48]:
        a.step([counts], np.random.default_rng(0))
    b = OptStream(d=1, groups=[DAY])
    out_a = [r for counts in x[48:96] for r in a.step([counts], np.random.default_rng(1))]
    out_b = [r for counts in x[48:96] for r in b.step([counts], np.random.default_rng(1))]
    assert [r.histogram.tolist() for r in out_a] == [r.histogram.tolist() for r in out_b]


def test_output_feasible_and_non_negative_spec_3_10():
    m = OptStream(d=3, groups=[DAY], strict=False, theta=500.0)
    rng = np.random.default_rng(4)
    out = [r for c in smooth_day(2, d=3) for r in m.step([c], rng)]
    h = np.array([r.histogram for r in out])
    assert h.shape == (96, 3) and (h >= 0).all()


def test_hierarchy_exactly_consistent_spec_3_9():
    """National = sum of regions for OptStream; per-region DFT does not add up to a DFT of
    the national series."""
    x = smooth_day(2, d=12, seed=1)
    m = HierOptStream(d=12, groups=[DAY], strict=False, alpha=10.0)
    rng = np.random.default_rng(2)
    out = [r for c in x for r in m.step([c.astype(float)], rng)]
    assert len(out) == 96
    leaves = np.array([r.histogram for r in out])
    assert (leaves >= 0).all()
    # the released root is the sum of the released leaves: nothing else is released
    assert np.allclose(leaves.sum(axis=1), np.array([r.histogram.sum() for r in out]))
    with pytest.raises(ParameterError, match="postprocess"):
        HierOptStream(d=2, groups=[DAY], postprocess=False)


def test_strict_mode_ledger_refuses_overspend_before_noise():
    """The ledger refuses a period that would overspend, before any noise is drawn."""
    m = OptStream(d=1, groups=[Group(4, 1.0)], k=2)
    b = m.ledger.budgets[0]
    m.charges = lambda: [b.total, 0, 0, b.total]  # claims eps_P = eps at both ends

    class NoDraws:
        def laplace(self, *args, **kwargs):
            raise AssertionError("noise drawn")

    for c in (1, 2, 3):
        m.step([[c]], NoDraws())
    with pytest.raises(InsufficientBudgetError):
        m.step([[4]], NoDraws())


def test_sliding_window_audit_spec_3_8():
    """The true loss of a sliding window is 2 eps_P where it straddles two periods: eps in
    strict mode, 2 eps with the paper's setting."""
    for strict, worst in ((True, 1.0), (False, 2.0)):
        m = OptStream(d=1, groups=[Group(6, 1.0)], k=3, strict=strict)
        touched = max((end - 1) // 6 - (max(1, end - 5) - 1) // 6 + 1 for end in range(1, 100))
        assert touched * m.period_eps == pytest.approx(worst)


def test_alpha_scales_every_noise_draw():
    """(w, alpha): with the same seed, every noise draw is alpha times the count stream's."""
    x = smooth_day(2) * 100
    outs = {}
    for alpha in (None, 10.0):
        m = OptStream(
            d=1, groups=[DAY], sampling="none", postprocess=False, alpha=alpha, noise="laplace"
        )
        rng = np.random.default_rng(6)
        data = x if alpha is None else x.astype(float)
        outs[alpha] = np.array([r.histogram for c in data for r in m.step([c], rng)])
    assert np.allclose(outs[10.0] - x, 10 * (outs[None] - x))


def test_counts_and_sums_validation():
    m = OptStream(d=2, groups=[DAY])
    with pytest.raises(ParameterError, match="integers"):
        m.step([[1.5, 2.0]], np.random.default_rng(0))
    s = OptStream(d=2, groups=[DAY], alpha=5.0)
    assert s.step([[1.5, 2.0]], np.random.default_rng(0)) == []
    with pytest.raises(ParameterError, match="finite"):
        s.step([[np.inf, 2.0]], np.random.default_rng(0))
    with pytest.raises(ParameterError, match="non-negative"):
        s.step([[-1.0, 2.0]], np.random.default_rng(0))


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({}, None),
        ({"k": 1}, "k"),
        ({"k": 2.5}, "k"),
        ({"theta": float("nan")}, "theta"),
        ({"sampling": "adaptive"}, "sampling"),
        ({"postprocess": "yes"}, "postprocess"),
        ({"features": [[0, 3]]}, "features"),
        ({"features": [[30, 20]]}, "features"),
        ({"features": []}, "features"),
        ({"features": [], "postprocess": False}, None),
        ({"feature_sensitivity": "loose"}, "feature_sensitivity"),
        ({"es_split": "quarters"}, "es_split"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": -1}, "alpha"),
        ({"strict": 1}, "strict"),
        ({"sensitivity": 2}, None),
    ],
)
def test_parameters(params, error):
    if error is None:
        OptStream(d=1, groups=[DAY], **params)
    else:
        with pytest.raises(ParameterError, match=error):
            OptStream(d=1, groups=[DAY], **params)


def test_registry_and_for_stream():
    assert {"optstream", "optstream_h", "dft", "pegasus"} <= set(names("period"))
    assert not {"optstream", "dft"} & set(names("central"))
    m = get("optstream").for_stream(12, [Group(48, 1.0), Group(24, 0.5)], sampling="es")
    assert (m.period, m.period_eps, m.sampling) == (48, 0.25, "es")
    assert isinstance(create("dft", d=2, groups=[DAY], k=5), DFT)
    assert isinstance(create("pegasus", d=2, groups=[DAY]), PeGaSus)
    assert "strict" in m.describe()


def test_window_report_and_exact_spending():
    """Strict mode: the window holds eps/2 after a period's first slot, eps at its end."""
    m = OptStream(d=1, groups=[Group(4, 1.0), Group(2, 0.5)], k=2)
    rng = np.random.default_rng(0)
    m.step([[1], [0]], rng)
    assert [(r.w, r.eps, r.fraction) for r in m.window_report()] == [(4, 0.5, 0.5)] * 2
    for c in (2, 3):
        m.step([[c], [c]], rng)
    out = m.step([[4], [0]], rng)
    assert m.window_report()[0].fraction == 1.0
    assert [r.spent_exact[1] * 4 for r in out] == [1, 0, 0, 1]  # eps_P = 0.25
