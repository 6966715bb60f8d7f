"""Frequency oracles: estimates are unbiased and their variance is the documented formula.

Every case draws ``REPEATS`` independent collections of ``REPORTS`` reports from a fixed
distribution (fixed seeds), estimates the frequencies, and tests

* the mean against the truth with a z-test whose standard error comes from the variance
  formula (critical value :data:`Z_CRIT`), and
* the sample variance against the formula with a chi-square test at level :data:`ALPHA`;

each test must also reject the estimates (or the variance) scaled by ``1 +- WRONG_SCALE``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from app.dp.oracles import GRR, OLH, OUE, choose, make

pytestmark = pytest.mark.slow

REPEATS = 400
REPORTS = 2_000
F = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
D = F.shape[0]
ALPHA = 1e-3
Z_CRIT = stats.norm.ppf(1 - ALPHA / 2)  # 3.29
WRONG_SCALE = 0.3
CHI_LOW, CHI_HIGH = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], REPEATS - 1)


def estimates(oracle, rng, path):
    """``(REPEATS, D)`` estimates, via devices (perturb + support) or the aggregate law."""
    counts = np.rint(F * REPORTS).astype(int)
    values = np.repeat(np.arange(D), counts)
    out = np.empty((REPEATS, D))
    for i in range(REPEATS):  # a loop over repetitions; each one is vectorized over reports
        if path == "devices":
            support = oracle.support(oracle.perturb(values, rng))
        else:
            support = oracle.sample_support(counts, rng)
        out[i] = oracle.estimate(support, REPORTS)
    return out


def z_ok(est, var):
    return bool((np.abs(est.mean(axis=0) - F) / np.sqrt(var / REPEATS) < Z_CRIT).all())


def chi_ok(est, var):
    stat = (REPEATS - 1) * est.var(axis=0, ddof=1) / var
    return bool(((stat > CHI_LOW) & (stat < CHI_HIGH)).all())


CASES = [
    (cls, eps, path)
    for cls in (GRR, OUE, OLH)
    for eps in (0.5, 2.0)
    for path in ("devices", "aggregate")
    if not (cls is OLH and path == "aggregate")
]


@pytest.mark.parametrize(("cls", "eps", "path"), CASES, ids=lambda x: getattr(x, "name", x))
def test_unbiased_with_the_documented_variance(cls, eps, path):
    oracle = cls(D, eps)
    est = estimates(oracle, np.random.default_rng([7, D, int(eps * 10), len(path)]), path)
    var = oracle.variance(REPORTS, F)
    assert z_ok(est, var), "mean differs from the truth"
    assert not z_ok(est * (1 + WRONG_SCALE), var) and not z_ok(est * (1 - WRONG_SCALE), var)
    assert chi_ok(est, var), "variance differs from the formula"
    assert not chi_ok(est, var * (1 + WRONG_SCALE)) and not chi_ok(est, var * (1 - WRONG_SCALE))
    assert math.isclose(float(var.mean()), oracle.mean_variance(REPORTS))


def test_grr_keeps_with_p_and_spreads_uniformly():
    """Spec §4: chi-square of 10**6 GRR draws of one value against (p, q, ..., q)."""
    eps, draws, value = 1.0, 1_000_000, 2
    y = GRR(D, eps).perturb(np.full(draws, value), np.random.default_rng(11))
    observed = np.bincount(y, minlength=D)

    def p_value(e):
        o = GRR(D, e)
        expected = np.full(D, o.q * draws)
        expected[value] = o.p * draws
        return stats.chisquare(observed, expected).pvalue

    assert p_value(eps) > ALPHA
    assert p_value(eps * (1 + WRONG_SCALE)) < ALPHA and p_value(eps * (1 - WRONG_SCALE)) < ALPHA


def test_paper_variance_vectors():
    """Spec §2.4: LBU vs LPU at eps=1, w=20, d=2, N=200,000."""
    assert GRR(2, 1 / 20).mean_variance(200_000) == pytest.approx(1.99958e-3, rel=1e-5)
    assert GRR(2, 1.0).mean_variance(200_000 // 20) == pytest.approx(9.2067e-5, rel=1e-4)


@pytest.mark.parametrize("w", [2, 5, 20, 40])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("d", [2, 5, 100])
def test_population_division_beats_budget_division(d, eps, w):
    """Thm 6.1 (H14): V(eps, N/w) < V(eps/w, N) for GRR and OUE."""
    for cls in (GRR, OUE):
        assert cls(d, eps).mean_variance(10_000 // w) < cls(d, eps / w).mean_variance(10_000)


def test_adaptive_choice():
    assert choose(2, 0.1) == "grr" and choose(3 * math.e + 3, 1.0) == "oue"
    assert make("adaptive", 50, 1.0).name == "oue" and make("adaptive", 4, 1.0).name == "grr"


@pytest.mark.parametrize("cls", [GRR, OUE, OLH])
def test_payloads_round_trip(cls):
    oracle = cls(D, 1.0)
    reports = oracle.perturb(np.arange(D).repeat(20), np.random.default_rng(3))
    back = oracle.from_payloads(oracle.payloads(reports))
    assert np.array_equal(oracle.support(back), oracle.support(reports))
