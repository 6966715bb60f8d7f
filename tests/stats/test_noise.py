"""Noise calibration: each sampler's variance matches its formula, the geometric sampler matches
its closed-form pmf, and each test rejects a scale off by 30%."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from app.dp.noise import keyed_rng, laplace, two_sided_geometric, variance
from app.dp.personalized import sample

pytestmark = pytest.mark.slow

N = 200_000
Z99 = 2.5758  # two-sided 99% normal quantile
CHI2_ALPHA = 1e-3  # a correct sampler fails the chi-square test with this probability
OFF = (0.7, 1.3)  # scales the tests must reject


def variance_interval(sigma2: float, mu4: float, n: int) -> tuple[float, float]:
    """99% interval of the sample variance of n draws (CLT: Var(s^2) ~ (mu4 - sigma^4) / n)."""
    half = Z99 * math.sqrt((mu4 - sigma2**2) / n)
    return sigma2 - half, sigma2 + half


def geometric_pmf(k: np.ndarray, eps: float) -> np.ndarray:
    a = math.exp(-eps)
    return (1 - a) / (1 + a) * a ** np.abs(k)


def geometric_moments(eps: float) -> tuple[float, float]:
    k = np.arange(-4000, 4001)
    p = geometric_pmf(k, eps)
    return float((p * k**2).sum()), float((p * k**4).sum())


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_laplace_variance(eps):
    x = laplace(np.random.default_rng(1), eps, N)
    b = 1 / eps
    lo, hi = variance_interval(2 * b**2, 24 * b**4, N)
    assert lo <= x.var() <= hi
    assert variance("laplace", eps) == 2 * b**2
    for f in OFF:  # the same test rejects a sampler at the wrong scale
        y = laplace(np.random.default_rng(1), eps * f, N)
        assert not lo <= y.var() <= hi


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_geometric_variance(eps):
    x = two_sided_geometric(np.random.default_rng(2), eps, N)
    sigma2, mu4 = geometric_moments(eps)
    assert variance("geometric", eps) == pytest.approx(sigma2, rel=1e-9)
    lo, hi = variance_interval(sigma2, mu4, N)
    assert lo <= x.var() <= hi
    for f in OFF:
        y = two_sided_geometric(np.random.default_rng(2), eps * f, N)
        assert not lo <= y.var() <= hi


def chi_square_p(x: np.ndarray, eps: float) -> float:
    """p-value of the chi-square test of x against the discrete Laplace pmf at eps."""
    a = math.exp(-eps)
    kmax = int(math.log(5 / N) / math.log(a))  # bins with expected count >= ~5
    ks = np.arange(-kmax, kmax + 1)
    expected = geometric_pmf(ks, eps) * N
    tail = (N - expected.sum()) / 2
    observed = np.array([(x < -kmax).sum(), *[(x == k).sum() for k in ks], (x > kmax).sum()])
    return float(stats.chisquare(observed, [tail, *expected, tail]).pvalue)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_geometric_pmf_chi_square(eps):
    assert chi_square_p(two_sided_geometric(np.random.default_rng(3), eps, N), eps) > CHI2_ALPHA
    for f in OFF:
        y = two_sided_geometric(np.random.default_rng(3), eps * f, N)
        assert chi_square_p(y, eps) < CHI2_ALPHA


def test_thinning_matches_per_user_sampling():
    """T15: binomial thinning of per-group counts has the law of per-user Bernoulli sampling."""
    rng = np.random.default_rng(4)
    counts = np.array([[30, 20], [10, 40]])
    pi = np.array([1.0, 0.3])
    draws = 10_000
    thinned = np.array([sample(counts, pi, rng) for _ in range(draws)])
    users_cell = np.repeat([0, 1, 0, 1], counts.ravel())
    users_pi = np.repeat(pi, counts.sum(axis=1))
    per_user = np.array(
        [
            np.bincount(users_cell[rng.random(users_pi.size) < users_pi], minlength=2)
            for _ in range(draws)
        ]
    )
    assert thinned.mean(axis=0) == pytest.approx([33, 32], abs=0.2)
    for j in range(2):  # two-sample chi-square on the distribution of each cell
        values = np.union1d(thinned[:, j], per_user[:, j])
        table = np.array(
            [
                [(thinned[:, j] == v).sum() for v in values],
                [(per_user[:, j] == v).sum() for v in values],
            ]
        )
        table = table[:, table.sum(axis=0) >= 10]
        assert stats.chi2_contingency(table).pvalue > CHI2_ALPHA


def test_keyed_rng_reproduces_a_slot():
    key = bytes(range(32))
    a = laplace(keyed_rng(key, "taxi", 41), 1.0, 8)
    assert np.array_equal(a, laplace(keyed_rng(key, "taxi", 41), 1.0, 8))
    assert not np.array_equal(a, laplace(keyed_rng(key, "taxi", 42), 1.0, 8))
    assert not np.array_equal(a, laplace(keyed_rng(key, "bus", 41), 1.0, 8))
    assert not np.array_equal(a, laplace(keyed_rng(bytes(32), "taxi", 41), 1.0, 8))
